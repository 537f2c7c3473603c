"""Built-in adapter ``torchrl``: TorchRL 0.14.1 with tensordict 0.14.3, through its real code paths.

    rlspec check --candidate torchrl                 # the recommended calls (below)
    rlspec check --candidate torchrl:vec_gae         # one of the VARIANTS, by attribute name

What each operation drives (paths in ``site-packages/torchrl``):

- ``gae``: ``objectives.value.functional.generalized_advantage_estimate`` (the loop), with
  ``done = terminated | truncated`` cutting the trace and ``terminated`` passed explicitly so that a
  truncation still bootstraps from ``next_state_value``. Inputs as TorchRL lays them out:
  ``[N, T, 1]``, time at dim -2.
- ``ppo_clip_loss``, ``ppo_value_loss``, ``ppo_entropy_loss``, ``normalize_advantages``: one real
  ``ClipPPOLoss.forward`` on a tensordict batch. The actor is a ``ProbabilisticTensorDictSequential``
  whose distribution scores the stored action with exactly the log-probability the suite asks for
  (``_GivenLogProb``), so ``d loss / d logp_new`` is the loss module's own gradient. The critic is an
  identity ``TensorDictModule`` returning the suite's values. ``normalize_advantages`` is read back
  from the gradient of a forward with ``normalize_advantage=True`` at ratio 1, where
  ``d loss / d logp_i = -A_norm_i / B``.
- ``kl_coefficient_update``: one real ``KLPENPPOLoss.forward`` whose two distributions differ by
  exactly the suite's KL (TorchRL's Monte Carlo KL path: ``log p_prev(x) - log p_cur(x)``), then
  the ``beta`` buffer the forward adapted.
- ``ppo_collected_ratios``: the collection path and the loss together. A ``ProbabilisticActor``
  (``OneHotCategorical``, ``IndependentNormal`` or ``TanhNormal``, ``return_log_prob=True``) over the
  described policy acts under ``set_exploration_type(RANDOM)``, as a collector runs it, storing ``action``
  and ``action_log_prob`` (since pytorch/rl PR #4080, the exact pre-tanh draw's); then ``ClipPPOLoss``
  with its defaults computes its log-ratio (``_log_weight``, what its forward clips) on that batch. It
  re-scores the stored action with ``dist.log_prob(action)``: for ``TanhNormal`` an inverse through a
  clamped atanh, so saturated draws do not come back at ratio 1 (docs/bugs-found.md).
- ``ppo_update``: the inner loop of TorchRL's PPO tutorial (tutorials/sphinx-tutorials/coding_ppo.py), as written
  there: every epoch ``replay_buffer.extend(batch)`` into ``ReplayBuffer(LazyTensorStorage(B),
  SamplerWithoutReplacement())``, then ``B // minibatch_size`` times ``sample``, ``ClipPPOLoss`` forward,
  ``loss_objective + loss_critic + loss_entropy``, ``backward``, ``clip_grad_norm_(loss_module.parameters())``,
  ``optim.step()``, ``optim.zero_grad()``. The suite's module is the actor (a ``ProbabilisticActor``: torch's
  ``Categorical`` on its logits, ``IndependentNormal`` on its mean and std) and the critic (``ValueOperator``), so
  the loss module's parameters are the module's and the suite's optimizer steps them; the stored batch is a
  tensordict (``action_log_prob`` = logp_old, ``advantage``, ``value_target`` = returns, ``state_value`` =
  values_old). The config maps onto ``clip_epsilon``, ``critic_coeff`` (vf_coef), ``entropy_coeff`` (ent_coef) and
  ``normalize_advantage`` (per minibatch, declared); the rest stays at TorchRL's defaults: the smooth L1 critic
  (``torchrl.xfail``; variant ``l2_critic``), no value clipping (declared; variant ``l2_value_clip`` maps
  ``value_clip_eps`` onto ``clip_value``), no KL early stop (``torchrl.xfail``). ``clip_epsilon > 1`` makes the
  lower log-bound NaN and the actor's gradient 0, and the tutorial's minibatches carry an epoch's leftover rows into
  the next epoch (docs/bugs-found.md). ``KLPENPPOLoss`` does not fit the protocol: its penalty needs the collecting
  policy's distribution parameters in the batch, and its objective is not the clip loss the update clauses judge.
- ``tanh_gaussian_log_prob`` / ``scaled_tanh_gaussian_log_prob``: ``modules.TanhNormal(mean,
  exp(log_std)[, low, high])`` scored as a ``ProbabilisticActor`` stores it when it acts:
  ``modules.distributions.utils.sample_and_log_prob`` (the exact pre-tanh draw's density) with the draw
  fixed to the suite's u. The variant ``tanh_log_prob_of_action`` scores the squashed action instead,
  ``TanhNormal.log_prob(action)`` -- the call ``ClipPPOLoss`` makes on a stored action, which inverts it
  through a clamped atanh (documented as for actions not drawn by the call).
- ``diag_gaussian_log_prob`` / ``diag_gaussian_entropy``: ``modules.IndependentNormal``.

Off-policy (``objectives/ddpg.py``, ``td3.py``, ``sac.py``, ``utils.py``). A replay batch is a ``[B]``
tensordict as TorchRL's collectors write it: ``observation`` ``[B, O]``, ``action`` ``[B, D]``, and under
``"next"`` the real next ``observation``, ``reward``, ``done = terminated | truncated`` and ``terminated``
(``[B, 1]`` each). The suite's modules are wrapped as TorchRL wraps networks: the actor as
``Actor(actor, in_keys=["observation"])``, each critic as ``ValueOperator`` writing ``state_action_value``
``[B, 1]``, the SAC policy as a ``ProbabilisticActor`` whose ``TanhNormal(mean, exp(log_std))`` (low -1,
high 1, TorchRL's safe tanh and exact Jacobian) draws ``loc + noise * scale`` with the suite's noise as
torch's standard-normal ``eps``. The loss modules hold the networks' parameters (one network's own
tensors; a list of twin critics stacked into a new parameter of the loss's) and clone target copies; the
suite's target networks are loaded into ``target_*_params`` (what SoftUpdate / HardUpdate maintain), and
the adapter makes a stack of twin critics a function of the suite's critics, so that a gradient the loss
sends into its critic parameters shows. Every loss runs with
TorchRL's defaults and its default value estimator, TD(0), at the protocol's gamma.

- ``td_target``: ``objectives.value.TD0Estimator(gamma, value_network=None)`` forward, ``next_q`` as
  ``("next", "state_value")``; its ``value_target``.
- ``ddpg_critic_target``: ``DDPGLoss(actor, critic).loss_value`` (delay_actor=False, delay_value=True),
  the target critic loaded; its ``target_value``. By default TorchRL keeps no target actor, so the target
  action is the online actor's (``torchrl.xfail``; the variant ``ddpg_delay_actor`` loads a target actor).
- ``td3_critic_target``: ``TD3Loss(actor, [critic1, critic2], bounds=(low, high), noise_clip,
  policy_noise=1.0).value_loss``, the target actor and critics loaded; its ``target_value``. Its one
  random draw, ``torch.randn_like(action)``, returns the suite's (already scaled) noise inside a
  ``TorchFunctionMode``; ``policy_noise=1`` keeps it as drawn, TorchRL clips it and the action.
- ``sac_critic_target``: ``SACLoss(policy, [critic1, critic2], alpha_init=alpha)._compute_target_v2``,
  the target ``qvalue_v2_loss`` regresses on (not returned by any public method), target critics
  loaded, the next action drawn at ``("next", "observation")`` with the suite's noise. ``log_alpha`` is
  the loss's float32 parameter (alpha = 0, which ``math.log`` refuses, is ``log_alpha = -inf``).
- ``dpg_actor_loss``: ``DDPGLoss.loss_actor`` (the critic's parameters detached); the variant
  ``td3_actor_loss`` drives ``TD3Loss.actor_loss`` with the critic as both Q-value networks.
- ``sac_actor_loss``: ``SACLoss.actor_loss`` at the reparameterised draw with the suite's noise.
- ``sac_alpha_loss``: one ``SACLoss.forward`` (``target_entropy="auto"`` from the action spec
  ``Bounded(-1, 1, (action_dim,))`` unless given) whose policy draws actions with exactly the suite's
  log-probabilities, with the suite's ``log_alpha`` swapped in for the loss's parameter
  (``TensorDict.to_module``, TorchRL's own functional call); its ``loss_alpha``. The log-probabilities
  reach the temperature loss as ``actor_loss`` hands them on, detached.
- ``polyak_update``: ``SoftUpdate(loss, tau=tau).step()`` once, on a ``DDPGLoss`` whose critic is the
  parameter vector (online ``value_network_params``, target ``target_value_network_params``).
- ``target_network_updates``: the same loss, with the updater a user picks: ``SoftUpdate(tau=tau)``
  where the target moves at every step (tau < 1, or tau = 1 with period 1: ``SoftUpdate(tau=1.0)`` copies
  at every ``step()``); SoftUpdate takes no period (tau < 1 with a period > 1 raises: ``torchrl.xfail``);
  a copy every ``period > 1`` steps is ``HardUpdate(value_network_update_interval=period)``, which copies
  on the step() calls period + 1, 2 (period + 1), ... (docs/bugs-found.md). One ``step()`` per gradient step; the updater's counter lives
  across train() calls, which are the user's loop.
- ``td3_actor_update_steps``: not provided. TD3Loss has no schedule: TorchRL's TD3 scripts delay the
  actor in their training loop.

Offline (``objectives/iql.py``, ``cql.py``). Networks read the suite's values off the batch (a Q- or
V-network returning the tensor stored under its in_key, plus a zero parameter for the losses that vmap
over Q-value parameters); the losses run with ``reduction="none"``, TorchRL's per-sample losses, where the
protocol asks for one value per sample.

- ``expectile_loss``: ``IQLLoss(expectile=tau).value_loss``: the target critics return ``target``, the
  value network ``prediction``; TorchRL forms ``min_q - value`` and ``IQLLoss.loss_value_diff``.
- ``iql_targets``: ``IQLLoss`` with one target critic per row of ``target_q`` (``num_qvalue_nets=K``).
  ``value_target`` is read back from ``value_loss`` at V(s) = 0 with the default expectile 1/2, whose
  loss is ``(min_k Q'_k)^2 / 2`` and whose gradient in V(s) is exactly ``-min_k Q'_k``; ``q_target`` is
  the loss's TD(0) ``value_estimator.value_estimate`` with the target value parameters, the call
  ``qvalue_loss`` makes, V(s') read off ``("next", ...)``.
- ``awr_loss``: ``IQLLoss(temperature=beta).actor_loss``: min Q' = 0 and V(s) = -A (TorchRL computes V under
  ``no_grad`` on a detached batch), the policy giving the dataset's action the suite's log-probability.
- ``cql_penalty``: ``DiscreteCQLLoss(action_space="categorical")`` forward on a ``QValueActor`` reading
  Q(s, .); its ``loss_cql`` = logsumexp Q - Q(s, a), times alpha (the loss has no weight: a training loop
  weighs ``loss_cql``).
- ``cql_sampled_penalty``: ``CQLLoss(num_random, temperature, min_q_weight=alpha,
  action_spec=Bounded(low, high)).q_loss`` then ``.cql_loss``. CQLLoss draws, per state, ``num_random``
  uniform actions and ``num_random`` policy actions at s and at s'; the suite's N uniform and M policy
  samples fill them (the first ceil(M / 2) at s', the rest at s) with ``num_random = max(N, ceil(M /
  2))``, empty places Q = -inf (exp(-inf) = 0: they add nothing to a logsumexp). The Q-network tells rows
  apart by their action (the dataset's: -10; policy sample j: 10 + j; CQLLoss's own uniform draws lie in
  [-1, 1], row r of a state holds sample r mod num_random) and returns Q(s, .) at the state itself;
  CQLLoss's two Q heads both read it and the output, their sum, is halved. The uniform draws come from
  torch's global generator, forked around the call. The variant ``cql_state_by_state`` runs each state
  alone with the default reduction.

Precision: TorchRL holds its coefficients as float32 tensors whatever the data's dtype -- GAE
multiplies ``gamma`` by an int32 mask (``gamma * (~terminated).int()``, functional.py:170), which is
float32, and the loss modules register ``clip_epsilon``, ``clip_value``, ``entropy_coeff``,
``critic_coeff`` and ``beta`` as float32 buffers; so are the TD(0) estimator's ``gamma``, SACLoss's
``log_alpha`` (alpha is ``exp`` of the float32 ``log(alpha_init)``) and ``target_entropy``. So results on
float64 data carry float32 rounding (measured: 6e-6 at T = 1e5, gamma = 0.99). The adapter declares
``RLSPEC_PRECISION = "float32"``: the suite judges it by float32 error bounds.

Conventions (RLSPEC_CONVENTIONS): ``ppo_value_loss`` is ``ClipPPOLoss``'s default critic loss,
``loss_critic_type="smooth_l1"`` (Huber's loss with delta 1, not the squared error: ``torchrl.xfail``);
the variant ``l2_critic`` asks for ``"l2"``, ``F.mse_loss`` with no 0.5 factor;
advantage normalisation is ``(A - mean) / std.clamp_min(1e-6)`` with the unbiased std, skipped for a
single element; no dual clip; the KL penalty doubles / halves beta above 1.5 / below 1/1.5 of dtarg.

Off-policy and offline conventions: the target updates are SoftUpdate (polyak) and HardUpdate (hard);
the actor losses detach the critics; the tanh Jacobian is exact; the temperature loss is in log_alpha with
``target_entropy="auto"`` = -|A|; CQLLoss sums the importance weights (one logsumexp of the concatenation)
with the densities inside the temperature (``density-inside``: CQL-SAMPLED-TEMPERATURE is in
``torchrl.xfail``); IQLLoss's ``temperature`` is an inverse temperature and its weight is clipped at 100.

Deliberate deviations are listed in ``torchrl.xfail`` beside this file; the variants in
``VARIANTS`` exercise the l2 critic loss (in the loss and the update), value clipping in the update,
the other GAE paths (vectorised, ``terminated`` omitted, the ``GAE`` module),
``TanhNormal.log_prob`` of a stored action, DDPGLoss with a target actor, SACLoss(skip_done_states=True),
TD3Loss's actor loss and CQLLoss state by state.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import tensordict
import torch
import torchrl
from tensordict import TensorDict, TensorDictParams
from tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential, TensorDictModule
from torch import nn
from torch.distributions import Distribution
from torch.overrides import TorchFunctionMode
from torchrl.data import Bounded, Categorical, LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers import SamplerWithoutReplacement
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import Actor, IndependentNormal, OneHotCategorical, ProbabilisticActor, QValueActor, TanhNormal, ValueOperator
from torchrl.modules.distributions.utils import sample_and_log_prob
from torchrl.objectives import (ClipPPOLoss, CQLLoss, DDPGLoss, DiscreteCQLLoss, HardUpdate, IQLLoss, KLPENPPOLoss, SACLoss,
                                SoftUpdate, TD3Loss)
from torchrl.objectives.utils import ValueEstimators
from torchrl.objectives.value import GAE, TD0Estimator
from torchrl.objectives.value.functional import generalized_advantage_estimate, vec_generalized_advantage_estimate

WRITTEN_AGAINST = "0.14.1"
# The releases this adapter drives (``rlspec matrix --releases`` reads it without importing the library; docs/releases.md).
RELEASES = {
    "distribution": "torchrl",
    "range": ">=0.12.0",
    "why": "0.12.0 is the first release whose loss modules take what this adapter builds (TD3Loss, IQLLoss and "
           "CQLLoss a list of Q-value networks, SACLoss its accepted keys, scalar_output_mode); on 0.11.1 those raise",
    "with": {"tensordict": "=={major}.{minor}.*"},  # released in step with TorchRL
}
RLSPEC_ARRAY = "torch"
RLSPEC_PRECISION = "float32"  # float32 coefficients whatever the data (see the module docstring)
RLSPEC_VERSION = f"torchrl {torchrl.__version__}, tensordict {tensordict.__version__}"
RLSPEC_CONVENTIONS = {
    "dual_clip": None,  # ClipPPOLoss has no dual clip
    # the default loss_critic_type="smooth_l1" is Huber's loss (torchrl.xfail); the l2_critic variant's
    # "l2" is F.mse_loss, no 0.5 (objectives/utils.py distance_loss)
    "value_loss_factor": 1.0,
    "advantage_std_ddof": 1,  # torchrl._utils._standardize: torch's unbiased std
    "advantage_eps": float(torch.finfo(torch.float).resolution),  # 1e-6, a clamp on the std
    "advantage_eps_form": "clamp",
    "kl_adaptive_factor": 2.0,  # KLPENPPOLoss: increment 2, decrement 0.5
    "kl_adaptive_threshold": 1.5,  # above 1.5 dtarg / below dtarg / 1.5
    # ppo_update (the tutorial's loop): ClipPPOLoss(normalize_advantage=True) standardises each minibatch in its forward
    "advantage_normalization": "minibatch",
    "value_clipping": "none",  # ClipPPOLoss(clip_value=None) by default; the variant l2_value_clip maps value_clip_eps onto it
    # the tutorial samples B // minibatch_size minibatches an epoch; SamplerWithoutReplacement keeps the rest of its
    # permutation for the next epoch's first sample (bugs-found 31: PPO-UPDATE-MINIBATCHES)
    "minibatch_remainder": "dropped",
    # off-policy
    "target_update_kinds": ["polyak", "hard"],  # SoftUpdate (every step() call), HardUpdate (every interval)
    "update_phase": "end",  # HardUpdate means steps k, 2k, ... (it copies on k + 1, 2(k + 1), ...: bugs-found)
    "actor_loss_critic_gradient": "none",  # DDPGLoss / TD3Loss / SACLoss detach the critics in the actor losses
    "tanh_log_prob_eps": None,  # TanhNormal: torch's TanhTransform Jacobian 2 (log 2 - u - softplus(-2u))
    "alpha_loss_parameter": "log_alpha",  # SACLoss._alpha_loss: -log_alpha (log_prob + target_entropy)
    "default_target_entropy_per_dim": -1.0,  # target_entropy="auto": -prod(action shape)
    # offline
    "cql_sampled_normalisation": "sum",  # CQLLoss: logsumexp of the concatenation, no log n
    "cql_temperature_form": "density-inside",  # CQLLoss: logsumexp((Q - log p) / T) * T (CQL-SAMPLED-TEMPERATURE: xfail)
    "awr_beta": "inverse-temperature",  # IQLLoss(temperature): exp(A * temperature)
    "awr_max_weight": 100.0,  # IQLLoss: exp_a.clamp_max(100)
}


# ---------------------------------------------------------------------------------------------
# gae


def _batch_time(x: torch.Tensor) -> torch.Tensor:
    """Protocol (T,) or (T, N) -> TorchRL's [N, T, 1] (batch, time at -2, one feature)."""
    return (x[:, None] if x.ndim == 1 else x).transpose(0, 1).unsqueeze(-1)


def _time_major(x: torch.Tensor, ndim: int) -> torch.Tensor:
    """[N, T, 1] -> the protocol's (T,) or (T, N)."""
    x = x.squeeze(-1).transpose(0, 1)
    return x[:, 0] if ndim == 1 else x


def _functional_gae(function, pass_terminated: bool):
    def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
        terminated_ = _batch_time(terminated)
        done = terminated_ | _batch_time(truncated)  # the trace stops at every episode end
        extra = {"terminated": terminated_} if pass_terminated else {}  # omitted: TorchRL uses done
        advantage, value_target = function(
            gamma, lam, _batch_time(values), _batch_time(next_values), _batch_time(rewards), done, **extra
        )
        return _time_major(advantage, rewards.ndim), _time_major(value_target, rewards.ndim)

    gae.__doc__ = f"{function.__name__}, terminated {'passed' if pass_terminated else 'omitted (defaults to done)'}."
    return gae


gae = _functional_gae(generalized_advantage_estimate, pass_terminated=True)


def _module_gae(vectorized: bool | None):
    """The ``GAE`` value-estimator module on a [T, N] tensordict (time_dim=0), with a value network
    that reads V off the observation, so the module itself evaluates V(s_t) and V(s_{t+1})."""

    def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
        shape = rewards.shape if rewards.ndim == 2 else (rewards.shape[0], 1)
        column = lambda x: x.reshape(shape).unsqueeze(-1)  # [T, N, 1]
        value_network = TensorDictModule(lambda obs: obs, in_keys=["observation"], out_keys=["state_value"])
        estimator = GAE(gamma=gamma, lmbda=lam, value_network=value_network, vectorized=vectorized, time_dim=0)
        data = TensorDict(
            {
                "observation": column(values),
                "next": {
                    "observation": column(next_values),
                    "reward": column(rewards),
                    "done": column(terminated | truncated),
                    "terminated": column(terminated),
                },
            },
            batch_size=shape,
        )
        out = estimator(data)
        advantage, value_target = out["advantage"].squeeze(-1), out["value_target"].squeeze(-1)
        return (advantage, value_target) if rewards.ndim == 2 else (advantage[:, 0], value_target[:, 0])

    gae.__doc__ = f"GAE(vectorized={vectorized}, time_dim=0) module forward."
    return gae


# ---------------------------------------------------------------------------------------------
# a controlled policy for the loss modules


class _GivenLogProb(Distribution):
    """A policy distribution that gives every action the log-probability ``logp`` (and entropy
    ``entropy``): it lets the loss module's own forward run on exactly the suite's log-probs."""

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, logp, entropy=None):
        self.logp, self._entropy = logp, entropy
        super().__init__(batch_shape=logp.shape, validate_args=False)

    def log_prob(self, value):
        return self.logp.expand(value.shape)

    def sample(self, sample_shape=torch.Size()):
        return torch.zeros(torch.Size(sample_shape) + self.batch_shape, dtype=self.logp.dtype)

    def entropy(self):
        return self._entropy if self._entropy is not None else torch.zeros_like(self.logp)


def _actor() -> ProbabilisticTensorDictSequential:
    """Actor: ``logp_in`` / ``entropy_in`` -> distribution parameters -> ``_GivenLogProb``."""
    parameters = TensorDictModule(lambda lp, h: (lp, h), in_keys=["logp_in", "entropy_in"], out_keys=["logp", "entropy"])
    head = ProbabilisticTensorDictModule(in_keys=["logp", "entropy"], out_keys=["action"], distribution_class=_GivenLogProb)
    return ProbabilisticTensorDictSequential(parameters, head)


def _critic() -> TensorDictModule:
    return TensorDictModule(lambda v: v, in_keys=["value_in"], out_keys=["state_value"])


def _batch(logp_new, logp_old, advantages, *, entropy=None, values=None, returns=None, old_values=None) -> TensorDict:
    """One PPO minibatch as TorchRL's losses read it (batch [B]; advantage and values [B, 1])."""
    n = logp_new.shape[0]
    zeros = torch.zeros(n, dtype=logp_new.dtype, device=logp_new.device)
    data = {
        "logp_in": logp_new,
        "entropy_in": entropy if entropy is not None else zeros,
        "action": zeros,
        "action_log_prob": logp_old.detach(),
        "advantage": advantages.detach().unsqueeze(-1),
    }
    if values is not None:
        data["value_in"] = values.unsqueeze(-1)
        data["value_target"] = returns.detach().unsqueeze(-1)
    if old_values is not None:
        data["state_value"] = old_values.detach().unsqueeze(-1)  # V_old, read by the value clip
    return TensorDict(data, batch_size=[n])


# ---------------------------------------------------------------------------------------------
# PPO through ClipPPOLoss.forward


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    loss = ClipPPOLoss(_actor(), None, clip_epsilon=clip_eps, entropy_bonus=False, normalize_advantage=False)
    return loss(_batch(logp_new, logp_old, advantages))["loss_objective"]


def _value_loss(loss_critic_type: str | None):
    """ClipPPOLoss's critic term; ``loss_critic_type`` None: TorchRL's default (``"smooth_l1"``)."""
    options = {} if loss_critic_type is None else {"loss_critic_type": loss_critic_type}

    def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
        clipped = old_values is not None and clip_eps is not None
        loss = ClipPPOLoss(_actor(), _critic(), entropy_bonus=False, normalize_advantage=False, critic_coeff=1.0,
                           clip_value=float(clip_eps) if clipped else None, **options)
        zeros = torch.zeros_like(values).detach()
        batch = _batch(zeros, zeros, zeros, values=values, returns=returns, old_values=old_values if clipped else None)
        return loss(batch)["loss_critic"]

    return ppo_value_loss


ppo_value_loss = _value_loss(None)


def ppo_entropy_loss(entropy, coef):
    loss = ClipPPOLoss(_actor(), None, entropy_bonus=True, entropy_coeff=float(coef), normalize_advantage=False)
    zeros = torch.zeros_like(entropy).detach()
    return loss(_batch(zeros, zeros, zeros, entropy=entropy))["loss_entropy"]


def normalize_advantages(advantages):
    """ClipPPOLoss(normalize_advantage=True) at ratio 1: loss = -mean(A_norm), so A_norm = -B dloss/dlogp."""
    n = advantages.shape[0]
    logp = torch.zeros(n, dtype=advantages.dtype, requires_grad=True)
    loss = ClipPPOLoss(_actor(), None, entropy_bonus=False, normalize_advantage=True)
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(loss(_batch(logp, logp.detach(), advantages))["loss_objective"], logp)
    return -n * grad


# ---------------------------------------------------------------------------------------------
# KL penalty


def kl_coefficient_update(beta, kl, target):
    """One KLPENPPOLoss forward whose previous and current policies are exactly ``kl`` apart."""
    loss = KLPENPPOLoss(_actor(), None, beta=float(beta), dtarg=float(target), entropy_bonus=False)
    zero = torch.zeros(1, dtype=torch.float64)
    batch = _batch(zero, zero, zero)
    batch["logp"] = torch.full((1,), float(kl), dtype=torch.float64)  # the stored (previous) distribution
    batch["entropy"] = zero
    loss(batch)
    return loss.beta.detach().clone()


# ---------------------------------------------------------------------------------------------
# squashed Gaussian


def diag_gaussian_log_prob(mean, log_std, action):
    return IndependentNormal(mean, log_std.exp()).log_prob(action)  # tanh_loc=False: the mean as given


def diag_gaussian_entropy(log_std):
    return IndependentNormal(torch.zeros_like(log_std), log_std.exp()).entropy()


def _collected_log_prob(dist, u):
    """The log-probability a ``ProbabilisticActor`` stores when it acts (RANDOM exploration, ``return_log_prob``):
    ``torchrl.modules.distributions.utils.sample_and_log_prob``, which scores the exact pre-tanh draw
    (``rsample_and_log_prob``), with the draw fixed to ``u``."""
    dist.base_dist.rsample = dist.base_dist.sample = lambda sample_shape=torch.Size(): u
    return sample_and_log_prob(dist, reparameterize=dist.has_rsample)[1]


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    """TanhNormal(mean, exp(log_std)) scored as a ProbabilisticActor stores it at collection: at the draw u itself."""
    return _collected_log_prob(TanhNormal(mean, log_std.exp()), pre_tanh)


def scaled_tanh_gaussian_log_prob(mean, log_std, pre_tanh, low, high):
    """TanhNormal(mean, exp(log_std), low, high) scored at the draw u, as a ProbabilisticActor stores it."""
    return _collected_log_prob(TanhNormal(mean, log_std.exp(), low=low, high=high), pre_tanh)


def _action_tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    """TanhNormal(mean, exp(log_std)).log_prob(tanh(u)): the call ClipPPOLoss makes on a stored action, inverted
    through a clamped atanh (documented: for actions not drawn by the call)."""
    return TanhNormal(mean, log_std.exp()).log_prob(torch.tanh(pre_tanh))


def _action_scaled_tanh_gaussian_log_prob(mean, log_std, pre_tanh, low, high):
    """TanhNormal(mean, exp(log_std), low, high).log_prob(a), a = low + (high - low)(tanh(u) + 1)/2."""
    action = low + (high - low) * (torch.tanh(pre_tanh) + 1) / 2
    return TanhNormal(mean, log_std.exp(), low=low, high=high).log_prob(action)


# ---------------------------------------------------------------------------------------------
# PPO on TorchRL's own collected batch


class _DescribedPolicy(nn.Module):
    """The policy the suite describes per state: observation (the state's row) -> its parameters, held as buffers
    (so ClipPPOLoss's functional copy of the actor holds them too)."""

    def __init__(self, loc, scale):
        super().__init__()
        self.register_buffer("loc", loc.detach().clone())
        self.register_buffer("scale", None if scale is None else scale.detach().clone())

    def forward(self, observation):
        rows = observation[..., 0].long()
        return self.loc[rows] if self.scale is None else (self.loc[rows], self.scale[rows])


def _described_actor(family, loc, scale) -> ProbabilisticActor:
    """The actor a TorchRL user builds for the family: OneHotCategorical on logits (TorchRL's discrete PPO
    examples), IndependentNormal, or TanhNormal (low -1, high 1; the continuous PPO examples), with
    ``return_log_prob=True`` so that acting stores the log-probability PPO reads."""
    if family == "categorical":
        head = TensorDictModule(_DescribedPolicy(loc, None), in_keys=["observation"], out_keys=["logits"])
        return ProbabilisticActor(head, in_keys=["logits"], distribution_class=OneHotCategorical, return_log_prob=True)
    head = TensorDictModule(_DescribedPolicy(loc, scale), in_keys=["observation"], out_keys=["loc", "scale"])
    distribution = TanhNormal if family == "tanh_gaussian" else IndependentNormal
    return ProbabilisticActor(head, in_keys=["loc", "scale"], distribution_class=distribution, return_log_prob=True)


def ppo_collected_ratios(family, loc, scale, seed):
    """Act as a collector does (``set_exploration_type(RANDOM)``: the actor samples and stores the action and its
    ``action_log_prob``), then the ratios ``ClipPPOLoss`` (defaults) computes on that batch before any update: its
    ``_log_weight``, the log-ratio its forward clips, which re-scores the stored action with ``dist.log_prob``."""
    B = loc.shape[0]
    actor = _described_actor(family, loc, scale)
    data = TensorDict({"observation": torch.arange(B, dtype=loc.dtype)[:, None]}, batch_size=[B])
    with torch.random.fork_rng(devices=[]), set_exploration_type(ExplorationType.RANDOM), torch.no_grad():
        torch.manual_seed(int(seed))
        data = actor(data)
    loss = ClipPPOLoss(actor, None)
    data["advantage"] = torch.zeros(B, 1, dtype=loc.dtype)
    with torch.no_grad():
        log_weight = loss._log_weight(data, adv_shape=torch.Size([B]))[0]
    return log_weight.reshape(B).exp()


# ---------------------------------------------------------------------------------------------
# a whole PPO update: ClipPPOLoss in the training loop of TorchRL's PPO tutorial, on the suite's module and optimizer


class _SuiteActorHead(nn.Module):
    """The suite's ``policy(obs) -> (dist, values)`` as the network of a TorchRL actor: observation -> the parameters
    of its distribution (``logits``, or ``loc`` and ``scale`` of a diagonal Gaussian). It holds the module itself,
    so the module's parameters are the actor's (and the loss module's: one optimizer, one gradient norm)."""

    def __init__(self, policy):
        super().__init__()
        self.policy = policy

    def forward(self, observation):
        dist, _ = self.policy(observation)
        if isinstance(dist, torch.distributions.Categorical):
            return dist.logits  # (B, A)
        return dist.loc, dist.scale  # (B, D) each: the Gaussian per dimension, joined by IndependentNormal


class _SuiteCriticHead(nn.Module):
    """The suite's module as a ValueOperator's network: observation -> V(s) ``[B, 1]``."""

    def __init__(self, policy):
        super().__init__()
        self.policy = policy

    def forward(self, observation):
        return self.policy(observation)[1].unsqueeze(-1)


def _suite_actor(policy, actions) -> ProbabilisticActor:
    """``ProbabilisticActor`` over the suite's distribution, as a TorchRL user writes one: torch's ``Categorical``
    on ``logits`` for integer actions ``[B]``, ``IndependentNormal(loc, scale)`` (the joint density of ``[B, D]``
    actions) for the Gaussian; ``return_log_prob`` as the tutorial's actor (the loss re-scores the stored action)."""
    if actions.dtype in (torch.int64, torch.int32) or not actions.is_floating_point():
        head = TensorDictModule(_SuiteActorHead(policy), in_keys=["observation"], out_keys=["logits"])
        return ProbabilisticActor(head, in_keys=["logits"], distribution_class=torch.distributions.Categorical,
                                  return_log_prob=True)
    head = TensorDictModule(_SuiteActorHead(policy), in_keys=["observation"], out_keys=["loc", "scale"])
    return ProbabilisticActor(head, in_keys=["loc", "scale"], distribution_class=IndependentNormal, return_log_prob=True)


def _stored_batch(obs, actions, logp_old, advantages, returns, values_old) -> TensorDict:
    """The collected batch as the tutorial's training loop holds it after its advantage module: ``observation``,
    ``action``, ``action_log_prob`` (log pi_old, stored by the actor at collection), ``advantage``, ``value_target``
    and ``state_value`` (V_old, the critic's at collection; the centre of ClipPPOLoss's value clip) ``[B, 1]``."""
    return TensorDict(
        {
            "observation": obs.detach(),
            "action": actions.detach(),
            "action_log_prob": logp_old.detach(),
            "advantage": advantages.detach().unsqueeze(-1),
            "value_target": returns.detach().unsqueeze(-1),
            "state_value": values_old.detach().unsqueeze(-1),
        },
        batch_size=[obs.shape[0]],
    )


def _tutorial_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config, **loss_options):
    """The inner loop of TorchRL's PPO tutorial (tutorials/sphinx-tutorials/coding_ppo.py, "Training loop"), as it is
    written there, on the stored batch: every epoch ``replay_buffer.extend(data)`` into a ``LazyTensorStorage(B)``
    with a ``SamplerWithoutReplacement()``, then ``B // minibatch_size`` times ``replay_buffer.sample(minibatch_size)``,
    ``loss_objective + loss_critic + loss_entropy``, ``backward``, ``clip_grad_norm_(loss_module.parameters())``,
    ``optim.step()``, ``optim.zero_grad()``. The advantage module the tutorial runs before each epoch is the suite's
    (the batch's stored advantages and returns). ``ClipPPOLoss`` takes the config's hyperparameters at its names
    (``critic_coeff = vf_coef``, ``entropy_coeff = ent_coef``, ``normalize_advantage``: per minibatch, in the
    forward); everything else at TorchRL's defaults unless ``loss_options`` says otherwise. The sampler draws from
    torch's global generator, seeded from the suite's seed for the call."""
    n, size = obs.shape[0], int(config["minibatch_size"])
    loss_module = ClipPPOLoss(
        _suite_actor(policy, actions),
        ValueOperator(_SuiteCriticHead(policy), in_keys=["observation"]),
        clip_epsilon=float(config["clip_eps"]),
        entropy_bonus=True,  # the tutorial's bool(entropy_eps); with ent_coef 0 the term is 0 and still logged
        entropy_coeff=float(config["ent_coef"]),
        critic_coeff=float(config["vf_coef"]),
        normalize_advantage=bool(config["normalize_advantages"]),
        **loss_options,
    )
    optim, max_grad_norm = optimizer, float(config["max_grad_norm"])
    replay_buffer = ReplayBuffer(storage=LazyTensorStorage(n), sampler=SamplerWithoutReplacement())
    data = _stored_batch(obs, actions, logp_old, advantages, returns, values_old)
    with torch.random.fork_rng(devices=[]), torch.enable_grad():
        torch.manual_seed(int(config["seed"]))
        for _ in range(int(config["epochs"])):
            data_view = data.reshape(-1)
            replay_buffer.extend(data_view)
            for _ in range(n // size):
                subdata = replay_buffer.sample(size)
                loss_vals = loss_module(subdata.to(obs.device))
                loss_value = loss_vals["loss_objective"] + loss_vals["loss_critic"] + loss_vals["loss_entropy"]
                loss_value.backward()
                torch.nn.utils.clip_grad_norm_(loss_module.parameters(), max_grad_norm)
                optim.step()
                optim.zero_grad()
    return None  # the tutorial logs; the suite watches its module and optimizer


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    """The tutorial's loop with ``ClipPPOLoss`` at its defaults: ``loss_critic_type="smooth_l1"`` (torchrl.xfail; the
    variant l2_critic judges "l2") and ``clip_value=None`` (no value clipping, whatever ``value_clip_eps`` says)."""
    return _tutorial_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config)


def _update_with(value_clip: bool = False, **fixed):
    """The tutorial's loop with ``ClipPPOLoss(**fixed)``; ``value_clip``: ``clip_value = value_clip_eps`` (None: off)."""

    def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
        options = dict(fixed)
        if value_clip:
            eps = config.get("value_clip_eps")
            options["clip_value"] = None if eps is None else float(eps)
        return _tutorial_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config, **options)

    shown = [f"{k}={v!r}" for k, v in fixed.items()] + (["clip_value=value_clip_eps"] if value_clip else [])
    ppo_update.__doc__ = f"The tutorial's loop with ClipPPOLoss({', '.join(shown)})."
    return ppo_update


# ---------------------------------------------------------------------------------------------
# off-policy: the suite's networks as TorchRL modules, a replay batch as a tensordict


class _QValue(nn.Module):
    """The suite's critic ``(obs, action) -> (B,)`` with the trailing feature dimension TorchRL's Q-value
    operators return (``state_action_value`` is ``[B, 1]``)."""

    def __init__(self, critic: nn.Module):
        super().__init__()
        self.critic = critic

    def forward(self, observation, action):
        return self.critic(observation, action).unsqueeze(-1)


def _qvalue(critic) -> ValueOperator:
    return ValueOperator(_QValue(critic), in_keys=["observation", "action"])  # writes "state_action_value"


def _deterministic(actor) -> Actor:
    return Actor(actor, in_keys=["observation"])  # writes "action"


class _GaussianHead(nn.Module):
    """The suite's SAC policy ``obs -> (mean, log_std)`` as TanhNormal's ``(loc, scale)``."""

    def __init__(self, policy: nn.Module):
        super().__init__()
        self.policy = policy

    def forward(self, observation):
        mean, log_std = self.policy(observation)
        return mean, log_std.exp()


class _GivenNoiseTanhNormal(TanhNormal):
    """``TanhNormal(loc, scale)`` (low -1, high 1, the safe tanh) whose reparameterised draw takes the suite's
    standard-normal noise for torch's: ``Normal.rsample`` is ``loc + eps * scale`` with ``eps = noise``. Everything
    else -- the tanh, ``rsample_and_log_prob``'s score of the exact pre-image, the Jacobian -- is TorchRL's."""

    def __init__(self, loc, scale, noise):
        super().__init__(loc, scale)
        normal = self.root_dist

        def rsample(sample_shape=torch.Size()):
            return normal.loc + noise.expand(normal._extended_shape(sample_shape)) * normal.scale

        normal.rsample = rsample


def _squashed_policy(policy, action_dim: int, dtype) -> ProbabilisticActor:
    head = TensorDictModule(_GaussianHead(policy), in_keys=["observation"], out_keys=["loc", "scale"])
    return ProbabilisticActor(head, in_keys=["loc", "scale", "noise"], distribution_class=_GivenNoiseTanhNormal,
                              spec=Bounded(-1.0, 1.0, (action_dim,), dtype=dtype))


def _column(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, 1)


def _replay(obs, actions, rewards, next_obs, terminated, truncated, *, noise=None, next_noise=None) -> TensorDict:
    """A replay batch as TorchRL's losses read it: ``[B]``, rewards and flags ``[B, 1]`` under ``"next"``, ``done =
    terminated | truncated`` (an episode end of either kind) and ``terminated`` apart, as TorchRL's environments and
    collectors write them."""
    data = {"observation": obs, "action": actions,
            "next": {"observation": next_obs, "reward": _column(rewards), "done": _column(terminated | truncated),
                     "terminated": _column(terminated), "truncated": _column(truncated)}}
    if noise is not None:
        data["noise"] = noise
    if next_noise is not None:
        data["next"]["noise"] = next_noise
    return TensorDict(data, batch_size=[rewards.shape[0]])


def _params(modules) -> TensorDict:
    """The parameters of one module (its own tensors), or of several stacked (a function of theirs, as TorchRL stacks
    the parameters of a list of Q-value networks)."""
    tds = [TensorDict.from_module(m) for m in modules]
    return tds[0] if len(tds) == 1 else tds[0].apply(lambda *xs: torch.stack(xs), *tds[1:], batch_size=[len(tds)])


def _link(loss, name: str, modules) -> None:
    """TorchRL copies a list of Q-value networks into one stacked parameter of the loss's own: make that stack a
    function of the suite's modules, so that a gradient the loss sends into ``loss.<name>_params`` reaches them."""
    setattr(loss, f"{name}_params", TensorDictParams(_params(modules), no_convert=True))


def _load_target(loss, name: str, modules) -> None:
    """The suite's target networks into the loss's ``target_<name>_params`` (what SoftUpdate / HardUpdate keep)."""
    getattr(loss, f"target_{name}_params").data.update_(_params(modules).data)


def _td0(loss, gamma):
    loss.make_value_estimator(ValueEstimators.TD0, gamma=gamma)  # the losses' default estimator, the protocol's gamma
    return loss


# ---------------------------------------------------------------------------------------------
# the TD(0) target


def td_target(rewards, next_q, terminated, truncated, gamma):
    """``TD0Estimator(gamma, value_network=None)`` forward: the next values read from ``("next", "state_value")``."""
    zeros = torch.zeros_like(_column(rewards))
    data = TensorDict({"state_value": zeros,
                       "next": {"state_value": _column(next_q), "reward": _column(rewards),
                                "done": _column(terminated | truncated), "terminated": _column(terminated)}},
                      batch_size=[rewards.shape[0]])
    return TD0Estimator(gamma=gamma, value_network=None)(data)["value_target"].squeeze(-1)


# ---------------------------------------------------------------------------------------------
# DDPG, TD3


def _ddpg_critic_target(**options):
    def ddpg_critic_target(actor, critic, target_actor, target_critic, obs, actions, rewards, next_obs, terminated, truncated,
                           gamma):
        loss = _td0(DDPGLoss(_deterministic(actor), _qvalue(critic), **options), gamma)
        _load_target(loss, "value_network", [_qvalue(target_critic)])
        if loss.delay_actor:  # the default delay_actor=False has no target actor: TorchRL uses the online one
            _load_target(loss, "actor_network", [_deterministic(target_actor)])
        _, metadata = loss.loss_value(_replay(obs, actions, rewards, next_obs, terminated, truncated))
        return metadata["target_value"]

    ddpg_critic_target.__doc__ = f"DDPGLoss({', '.join(f'{k}={v!r}' for k, v in options.items())}).loss_value: its target_value."
    return ddpg_critic_target


ddpg_critic_target = _ddpg_critic_target()


class _GivenSmoothingNoise(TorchFunctionMode):
    """Inside ``TD3Loss.value_loss``, its one random draw -- ``torch.randn_like(action)``, the smoothing noise before
    ``* policy_noise`` and the clip -- returns the suite's noise."""

    def __init__(self, noise):
        super().__init__()
        self.noise = noise

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.randn_like:
            if args[0].shape != self.noise.shape:
                raise RuntimeError(f"TD3Loss drew noise of shape {tuple(args[0].shape)}, expected {tuple(self.noise.shape)}")
            return self.noise.clone()
        return func(*args, **(kwargs or {}))


def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    """TD3Loss(bounds=(low, high), noise_clip, policy_noise=1.0).value_loss with the suite's noise as the draw."""
    loss = _td0(TD3Loss(_deterministic(actor), [_qvalue(critic1), _qvalue(critic2)], bounds=(low, high),
                        noise_clip=float(noise_clip), policy_noise=1.0), gamma)
    _load_target(loss, "actor_network", [_deterministic(target_actor)])
    _load_target(loss, "qvalue_network", [_qvalue(target_critic1), _qvalue(target_critic2)])
    with _GivenSmoothingNoise(noise):
        _, metadata = loss.value_loss(_replay(obs, actions, rewards, next_obs, terminated, truncated))
    return metadata["target_value"]


def dpg_actor_loss(actor, critic, obs):
    """DDPGLoss.loss_actor: -mean Q(s, mu(s)) with the critic's parameters detached."""
    loss = DDPGLoss(_deterministic(actor), _qvalue(critic))
    loss_actor, _ = loss.loss_actor(TensorDict({"observation": obs}, batch_size=[obs.shape[0]]))
    return loss_actor


def _td3_dpg_actor_loss(actor, critic, obs):
    """TD3Loss.actor_loss with the critic as both Q-value networks (the loss reads the first)."""
    ones = torch.ones(1, dtype=obs.dtype)
    loss = TD3Loss(_deterministic(actor), [_qvalue(critic), _qvalue(critic)], bounds=(-ones, ones))
    _link(loss, "qvalue_network", [_qvalue(critic), _qvalue(critic)])
    loss_actor, _ = loss.actor_loss(TensorDict({"observation": obs}, batch_size=[obs.shape[0]]))
    return loss_actor


# ---------------------------------------------------------------------------------------------
# SAC


def _sac_loss(policy, critic1, critic2, alpha, action_dim, dtype, **options) -> SACLoss:
    """SACLoss on the suite's policy and twin critics, alpha_init=alpha (log_alpha is TorchRL's float32 parameter;
    alpha = 0, which alpha_init cannot take, is log_alpha = -inf)."""
    alpha = float(alpha)
    loss = SACLoss(_squashed_policy(policy, action_dim, dtype), [_qvalue(critic1), _qvalue(critic2)],
                   **({"alpha_init": alpha} if alpha > 0 else {}), **options)
    if alpha <= 0:
        loss.log_alpha.data.fill_(-math.inf)
    return loss


def _sac_critic_target(**options):
    def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs, terminated,
                          truncated, gamma, alpha, noise):
        loss = _td0(_sac_loss(policy, critic1, critic2, alpha, noise.shape[-1], noise.dtype, **options), gamma)
        _load_target(loss, "qvalue_network", [_qvalue(target_critic1), _qvalue(target_critic2)])
        return loss._compute_target_v2(_replay(obs, actions, rewards, next_obs, terminated, truncated, next_noise=noise))

    sac_critic_target.__doc__ = (f"SACLoss({', '.join(f'{k}={v!r}' for k, v in options.items())})._compute_target_v2, "
                                 "the target qvalue_v2_loss regresses on.")
    return sac_critic_target


sac_critic_target = _sac_critic_target()


def sac_actor_loss(policy, critic1, critic2, obs, alpha, noise):
    """SACLoss.actor_loss: alpha log pi - min Q at the reparameterised draw, the critics' parameters detached."""
    loss = _sac_loss(policy, critic1, critic2, alpha, noise.shape[-1], noise.dtype)
    _link(loss, "qvalue_network", [_qvalue(critic1), _qvalue(critic2)])
    loss_actor, _ = loss.actor_loss(TensorDict({"observation": obs, "noise": noise}, batch_size=[obs.shape[0]]))
    return loss_actor


class _GivenDraw(Distribution):
    """A policy whose reparameterised draw is ``draw`` with log-probability ``logp``: SACLoss.forward runs on exactly
    the suite's log-probabilities."""

    arg_constraints: dict = {}
    has_rsample = True

    def __init__(self, logp, draw):
        self.logp, self.draw = logp, draw
        super().__init__(batch_shape=logp.shape, validate_args=False)

    def rsample(self, sample_shape=torch.Size()):
        return self.draw

    def log_prob(self, value):
        return self.logp


class _ZeroQ(nn.Module):
    """Q = 0 (through a parameter, which the vmapped Q-value networks need)."""

    def __init__(self, dtype):
        super().__init__()
        self.c = nn.Parameter(torch.zeros((), dtype=dtype))

    def forward(self, observation, action):
        return self.c * action[..., 0]


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    """One SACLoss.forward (target_entropy "auto" from the action spec unless given) whose policy draws the suite's
    log-probabilities, with the suite's log_alpha swapped in for the loss's parameter; its loss_alpha."""
    B, dtype = log_prob.shape[0], log_prob.dtype
    head = TensorDictModule(lambda logp, draw: (logp, draw), in_keys=["logp_in", "draw_in"], out_keys=["logp", "draw"])
    actor = ProbabilisticActor(head, in_keys=["logp", "draw"], distribution_class=_GivenDraw,
                               spec=Bounded(-1.0, 1.0, (int(action_dim),), dtype=dtype))
    options = {} if target_entropy is None else {"target_entropy": float(target_entropy)}
    loss = SACLoss(actor, [_qvalue(_ZeroQ(dtype)), _qvalue(_ZeroQ(dtype))], **options)
    draw = torch.zeros(B, int(action_dim), dtype=dtype)
    zeros, no = torch.zeros(B, 1, dtype=dtype), torch.zeros(B, 1, dtype=torch.bool)
    data = TensorDict({"observation": zeros, "action": draw, "logp_in": log_prob, "draw_in": draw,
                       "next": {"observation": zeros, "reward": zeros, "done": no, "terminated": no, "logp_in": log_prob,
                                "draw_in": draw}}, batch_size=[B])
    with TensorDict({"log_alpha": log_alpha}, batch_size=[]).to_module(loss):
        return loss(data)["loss_alpha"]


# ---------------------------------------------------------------------------------------------
# target networks: SoftUpdate and HardUpdate on a loss whose one network is a parameter vector


class _Theta(nn.Module):
    def __init__(self, values):
        super().__init__()
        self.theta = nn.Parameter(values.detach().clone())

    def forward(self, observation):
        return observation * 0 + self.theta


def _updated(target, online, make_updater):
    """A DDPGLoss whose critic is the parameter vector (delay_value=True: a target copy), the updater built on it, the
    suite's target loaded; yields a function that sets the online parameters, steps the updater and returns the
    target."""
    net = _Theta(online[0] if online.ndim > 1 else online)
    loss = DDPGLoss(Actor(nn.Identity(), in_keys=["observation"]), ValueOperator(net, in_keys=["observation"]))
    updater = make_updater(loss)  # init_() copies the online parameters into the target
    loss.target_value_network_params.data.update_(TensorDict.from_module(ValueOperator(_Theta(target))).data)

    def step(theta):
        net.theta.data.copy_(theta)
        updater.step()
        return loss.target_value_network_params["module", "theta"].detach().clone()

    return step


def polyak_update(target, online, tau):
    """SoftUpdate(loss, tau=tau).step() once."""
    return _updated(target, online, lambda loss: SoftUpdate(loss, tau=float(tau)))(online)


def target_network_updates(target, online, tau, period, gradient_steps):
    """Period 1 (any tau, 1 included): SoftUpdate(tau=tau), which updates at every step() and has no period; tau = 1
    with a period > 1: HardUpdate(value_network_update_interval=period). One step() per gradient step; the updater
    keeps its state across train() calls, which are the user's loop (gradient_steps only sums to N)."""
    N, tau, period = online.shape[0], float(tau), int(period)
    if sum(gradient_steps) != N:
        raise ValueError(f"gradient_steps {gradient_steps} do not sum to {N}")
    if tau < 1.0 and period != 1:
        raise ValueError("TorchRL's SoftUpdate has no period: it updates the target at every step(); only HardUpdate (tau = 1) "
                         "takes one (value_network_update_interval)")
    # tau = 1 every step is SoftUpdate(tau=1.0), a copy at every step(): what a user writes for "copy every step"
    make = (lambda loss: SoftUpdate(loss, tau=tau)) if tau < 1.0 or period == 1 else (
        lambda loss: HardUpdate(loss, value_network_update_interval=period))
    step = _updated(target, online, make)
    return torch.stack([step(online[n]) for n in range(N)])


# ---------------------------------------------------------------------------------------------
# offline: IQLLoss, DiscreteCQLLoss, CQLLoss on networks that read the suite's values off the batch


class _Read(nn.Module):
    """A Q- or V-network that returns the value stored in the batch under its in_key, ``[B, 1]`` (plus a zero
    parameter: the loss modules vmap their Q-value networks over parameters)."""

    def __init__(self, dtype):
        super().__init__()
        self.c = nn.Parameter(torch.zeros((), dtype=dtype))

    def forward(self, value):
        return value + self.c


def _reader(key: str, dtype, out: str = "state_action_value") -> ValueOperator:
    return ValueOperator(_Read(dtype), in_keys=[key], out_keys=[out])


def _iql(target, value, dtype, *, log_prob=None, **options) -> tuple[IQLLoss, TensorDict]:
    """IQLLoss(reduction="none") whose twin target critics return ``target`` and value network ``value`` (``[B]``
    each), and whose policy gives the dataset's action the log-probability ``log_prob``; the batch it reads."""
    B = target.shape[0]
    loss = IQLLoss(_actor(), [_reader("q_in", dtype), _reader("q_in", dtype)], _reader("v_in", dtype, "state_value"),
                   reduction="none", scalar_output_mode="exclude", **options)
    zeros = torch.zeros(B, dtype=dtype)
    data = TensorDict({"q_in": _column(target), "v_in": _column(value), "action": zeros,
                       "logp_in": zeros if log_prob is None else log_prob, "entropy_in": zeros}, batch_size=[B])
    return loss, data


def expectile_loss(target, prediction, tau):
    """IQLLoss(expectile=tau, reduction="none").value_loss: min of the target critics (both ``target``) minus the value
    network (``prediction``), through IQLLoss.loss_value_diff."""
    loss, data = _iql(target, prediction, prediction.dtype, expectile=float(tau))
    value_loss, _ = loss.value_loss(data)
    return value_loss


class _RowQ(nn.Module):
    """A target critic whose parameter is its Q'(s, a_data) for each row of the batch."""

    def __init__(self, values):
        super().__init__()
        self.q = nn.Parameter(values.detach().clone())

    def forward(self, observation):
        return self.q.unsqueeze(-1) + 0 * observation


def iql_targets(target_q, rewards, next_values, terminated, truncated, gamma):
    """IQLLoss with one target critic per row of target_q and a value network reading V off the batch.
    value_target: IQLLoss.value_loss (reduction "none", the default expectile 1/2) at V(s) = 0 is (min_k Q'_k)^2 / 2, whose
    gradient in V(s) is -min_k Q'_k: read back exactly. q_target: the loss's TD(0) value estimator, value_estimate with
    the target value parameters -- the call IQLLoss.qvalue_loss makes."""
    K, B = target_q.shape
    dtype = rewards.dtype
    critics = [ValueOperator(_RowQ(target_q[k]), in_keys=["observation"], out_keys=["state_action_value"]) for k in range(K)]
    loss = _td0(IQLLoss(_actor(), critics if K > 1 else critics[0], _reader("v_in", dtype, "state_value"), num_qvalue_nets=K,
                        reduction="none", scalar_output_mode="exclude"), gamma)
    zeros = torch.zeros(B, dtype=dtype)
    value = torch.zeros(B, 1, dtype=dtype, requires_grad=True)
    data = TensorDict({"observation": _column(zeros), "v_in": value, "action": zeros, "logp_in": zeros, "entropy_in": zeros,
                       "next": {"observation": _column(zeros), "v_in": _column(next_values), "reward": _column(rewards),
                                "done": _column(terminated | truncated), "terminated": _column(terminated)}}, batch_size=[B])
    with torch.enable_grad():
        value_loss, _ = loss.value_loss(data)
        (grad,) = torch.autograd.grad(value_loss.sum(), value)
    q_target = loss.value_estimator.value_estimate(data, target_params=loss.target_value_network_params).squeeze(-1)
    return -grad.squeeze(-1), q_target.detach()


def awr_loss(log_prob, advantages, beta):
    """IQLLoss(temperature=beta, reduction="none").actor_loss with min Q' = 0 and V(s) = -A: exp(A beta).clamp_max(100)
    times -log pi. V enters as TorchRL computes it, under no_grad on a detached batch."""
    loss, data = _iql(torch.zeros_like(advantages), -advantages, log_prob.dtype, log_prob=log_prob, temperature=float(beta))
    loss_actor, _ = loss.actor_loss(data)
    return loss_actor


def cql_penalty(q_values, actions, alpha):
    """DiscreteCQLLoss(action_space="categorical", reduction="none") forward on a QValueActor reading Q(s, .) off the
    batch; its loss_cql, logsumexp Q - Q(s, a), times alpha (the loss has no weight of its own: a training loop weighs
    loss_cql)."""
    B, A = q_values.shape
    dtype = q_values.dtype
    network = QValueActor(_Read(dtype), in_keys=["q_in"], spec=Categorical(A))
    loss = DiscreteCQLLoss(network, action_space="categorical", reduction="none")
    no = torch.zeros(B, 1, dtype=torch.bool)
    data = TensorDict({"q_in": q_values, "action": actions,
                       "next": {"q_in": q_values.detach(), "reward": torch.zeros(B, 1, dtype=dtype), "done": no, "terminated": no}},
                      batch_size=[B])
    return float(alpha) * loss(data)["loss_cql"]


class _SampledQ(nn.Module):
    """CQLLoss's Q-value network on the suite's samples. A row's observation is ``(b, next?)``; its action tells the
    rows apart: -10 the dataset's action (Q(s_b, a_data)), 10 + j the policy's sample j, anything in [-1, 1] the
    uniform sample i = row % num_random (CQLLoss draws those itself and repeats each state num_random times)."""

    def __init__(self, tables, num_random: int, dtype):
        super().__init__()
        self.c = nn.Parameter(torch.zeros((), dtype=dtype))
        self.q_uniform, self.q_policy, self.q_data = tables
        self.num_random = num_random

    def forward(self, observation, action):
        b = observation[..., 0].long()
        marker = action[..., 0]
        rows = torch.arange(observation.shape[0]) % self.num_random
        policy = self.q_policy[b, (marker - 10).round().long().clamp(0, self.q_policy.shape[1] - 1)]
        value = torch.where(marker < -5, self.q_data[b], torch.where(marker > 5, policy, self.q_uniform[b, rows]))
        return (value + self.c).unsqueeze(-1)


class _SampledPolicy(nn.Module):
    """CQLLoss's policy: in row r of a state repeated num_random times, sample i = r % num_random of the next-state
    block (observation flagged next) or of the current-state block, with its log-probability."""

    def __init__(self, log_pi, num_random: int, action_dim: int):
        super().__init__()
        self.log_pi, self.num_random, self.action_dim = log_pi, num_random, action_dim

    def forward(self, observation):
        n, nr = observation.shape[0], self.num_random
        b, current = observation[:, 0].long(), observation[:, 1] == 0
        i = torch.arange(n) % nr if n == self.log_pi.shape[0] * nr else torch.zeros(n, dtype=torch.long)
        j = torch.where(current, nr + i, i)
        draw = torch.zeros(n, self.action_dim, dtype=observation.dtype)
        draw[:, 0] = 10 + j
        return self.log_pi[b, j], draw


def _cql_sampled(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature, reduction=None):
    """One CQLLoss(num_random, temperature, min_q_weight=alpha, action_spec=box) q_loss + cql_loss on every state.
    CQLLoss draws num_random uniform actions and num_random policy actions at s and at s' per state; the suite's N
    uniform and M policy samples fill them (the first ceil(M / 2) at s', the rest at s), with num_random = max(N,
    ceil(M / 2)) and the empty places Q = -inf, log pi = 0 (exp(-inf) = 0: they add nothing to a logsumexp). Its two Q
    heads both read the suite's values: the output, their sum, is halved."""
    (B, N), M = q_uniform.shape, q_policy.shape[1]
    dtype, D = q_data.dtype, action_low.shape[0]
    nr, at_next = max(N, -(-M // 2)), -(-M // 2)
    minus_inf = lambda rows, cols: torch.full((rows, cols), -math.inf, dtype=dtype)
    uniform = torch.cat([q_uniform, minus_inf(B, nr - N)], 1)
    policy = torch.cat([q_policy[:, :at_next], minus_inf(B, nr - at_next), q_policy[:, at_next:], minus_inf(B, nr - (M - at_next))], 1)
    zero = lambda rows, cols: torch.zeros(rows, cols, dtype=dtype)
    logp = torch.cat([log_pi[:, :at_next], zero(B, nr - at_next), log_pi[:, at_next:], zero(B, nr - (M - at_next))], 1)
    tables = (uniform, policy, q_data)
    head = TensorDictModule(_SampledPolicy(logp, nr, D), in_keys=["observation"], out_keys=["logp", "draw"])
    actor = ProbabilisticActor(head, in_keys=["logp", "draw"], distribution_class=_GivenDraw,
                               spec=Bounded(action_low, action_high, (D,), dtype=dtype))
    critics = [ValueOperator(_SampledQ(tables, nr, dtype), in_keys=["observation", "action"]) for _ in range(2)]
    loss = CQLLoss(actor, critics, num_random=nr, temperature=float(temperature), min_q_weight=float(alpha),
                   action_spec=Bounded(action_low, action_high, (D,), dtype=dtype),
                   **({} if reduction is None else {"reduction": reduction, "scalar_output_mode": "exclude"}))
    index = torch.arange(B, dtype=dtype)[:, None]
    no = torch.zeros(B, 1, dtype=torch.bool)
    data = TensorDict({"observation": torch.cat([index, torch.zeros_like(index)], 1),
                       "action": torch.cat([torch.full((B, 1), -10.0, dtype=dtype), zero(B, D - 1)], 1),
                       "next": {"observation": torch.cat([index, torch.ones_like(index)], 1), "reward": zero(B, 1), "done": no,
                                "terminated": no}}, batch_size=[B])
    with torch.random.fork_rng(devices=[]):  # CQLLoss draws its uniform actions from torch's global generator
        loss.q_loss(data)  # writes Q(s, a_data) of both heads into the batch for cql_loss
        penalty, _ = loss.cql_loss(data)
    return penalty / 2


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    """CQLLoss with reduction="none" on the whole batch: its per-state cql loss."""
    return _cql_sampled(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature, reduction="none")


def _cql_sampled_state_by_state(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    """CQLLoss with its default reduction ("mean") on one state at a time."""
    return torch.stack([_cql_sampled(q_uniform[b:b + 1], q_policy[b:b + 1], log_pi[b:b + 1], q_data[b:b + 1], action_low,
                                     action_high, alpha, temperature) for b in range(q_data.shape[0])])


# ---------------------------------------------------------------------------------------------
# the other GAE paths, each a candidate of its own: --candidate torchrl:NAME


def _variant(doc: str, **operations) -> SimpleNamespace:
    return SimpleNamespace(__doc__=doc, **operations)


vec_gae = _variant(
    "vec_generalized_advantage_estimate with terminated passed (the conv1d path).",
    gae=_functional_gae(vec_generalized_advantage_estimate, pass_terminated=True),
)
gae_without_terminated = _variant(
    "generalized_advantage_estimate with terminated omitted: TorchRL defaults it to done.",
    gae=_functional_gae(generalized_advantage_estimate, pass_terminated=False),
)
vec_gae_without_terminated = _variant(
    "vec_generalized_advantage_estimate with terminated omitted: TorchRL defaults it to done.",
    gae=_functional_gae(vec_generalized_advantage_estimate, pass_terminated=False),
)
gae_module = _variant("The GAE module with its default vectorized=None (runs the loop).", gae=_module_gae(None))
gae_module_vectorized = _variant("The GAE module with vectorized=True.", gae=_module_gae(True))

tanh_log_prob_of_action = _variant(
    "TanhNormal.log_prob(action): a stored squashed action re-scored as ClipPPOLoss does, through a clamped atanh "
    "(the main column scores the draw, as the actor stores it).",
    tanh_gaussian_log_prob=_action_tanh_gaussian_log_prob,
    scaled_tanh_gaussian_log_prob=_action_scaled_tanh_gaussian_log_prob,
)

l2_critic = _variant(
    "ClipPPOLoss(loss_critic_type='l2'): the squared-error critic loss (F.mse_loss, no 0.5) instead of the default "
    "smooth L1, in the loss and in the tutorial's update loop.",
    ppo_value_loss=_value_loss("l2"),
    ppo_update=_update_with(loss_critic_type="l2"),
)
l2_value_clip = SimpleNamespace(
    __doc__="The tutorial's update loop with ClipPPOLoss(loss_critic_type='l2', clip_value=value_clip_eps): TorchRL's "
            "value clipping (off by default), max of the squared errors of V and of V_old + clamp(V - V_old, -eps, eps).",
    ppo_update=_update_with(value_clip=True, loss_critic_type="l2"),
    RLSPEC_CONVENTIONS={**RLSPEC_CONVENTIONS, "value_clipping": "config"},
)

ddpg_delay_actor = _variant(
    "DDPGLoss(delay_actor=True): a target actor of its own (the default delay_actor=False bootstraps with the online actor).",
    ddpg_critic_target=_ddpg_critic_target(delay_actor=True),
)
sac_skip_done_states = _variant(
    "SACLoss(skip_done_states=True): the next action is sampled only where the episode is not done.",
    sac_critic_target=_sac_critic_target(skip_done_states=True),
)
cql_state_by_state = _variant(
    "CQLLoss with its default reduction (mean) on one state at a time: the sampled penalty without reduction='none'.",
    cql_sampled_penalty=_cql_sampled_state_by_state,
)
td3_actor_loss = _variant("TD3Loss.actor_loss for the deterministic actor loss (DDPGLoss.loss_actor in the main column).",
                          dpg_actor_loss=_td3_dpg_actor_loss)

VARIANTS = ("l2_critic", "l2_value_clip", "tanh_log_prob_of_action", "vec_gae", "gae_without_terminated", "vec_gae_without_terminated", "gae_module", "gae_module_vectorized",
            "ddpg_delay_actor", "sac_skip_done_states", "td3_actor_loss", "cql_state_by_state")


# ======================================================================================
# Normalisation and the diagnostics of an update (spec/clauses/35_normalisation.toml), kept in one section.
#
# - running_moments / normalize_observations / scale_rewards: ``envs.transforms.VecNorm()`` as a user gets it (the
#   old class: ``new_api`` defaults to False in 0.14.1, with a FutureWarning), called on each step's tensordict as a
#   ``TransformedEnv`` calls it (``forward = _call``; ``freeze()`` for evaluation). It keeps decayed sums of x and x^2
#   and a decayed count (decay 0.9999 per call: declared ``moments_decay``), shared by the batch's environments, and
#   returns ``(x - mean) / std`` with ``std = sqrt(max(ssq / count - mean^2, eps))``, eps 1e-4: ``max(sqrt(var),
#   0.01)`` (declared ``normalization_eps_form = "max-std"``, ``normalization_eps = 0.01``), unclipped. The statistics
#   running_moments returns are those ``_get_loc_scale`` forms, read before its clamp: ``_sum / _count`` and
#   ``_ssq / _count - mean^2``. float32 tensors, as TorchRL's environments hold them.
#   VecNorm's default ``in_keys`` are ``["observation", "reward"]``: its reward normalisation standardises each
#   reward by the running mean and std of the rewards themselves, with no discount and no return accumulator.
#   TorchRL has no reward scaling by the return's std, so the main column does not provide ``scale_rewards``; the
#   variant ``vecnorm_reward`` maps VecNorm's reward standardisation onto it (docs/bugs-found.md: not a defect).
# - diagnostic_approx_kl / _clip_fraction / _entropy / _explained_variance: ``ClipPPOLoss.forward``'s logged
#   ``kl_approx`` (the mean of ``prox_log_prob - log_prob``: k1, declared), ``clip_fraction`` (``log_weight.clamp(
#   log1p(-eps), log1p(eps)) != log_weight``), ``entropy`` (``dist.entropy()`` of an actor whose distribution_class
#   is torch's Categorical over the suite's logits, averaged) and
#   ``explained_variance`` (``1 - var(target - value) / (var(target) + eps)``, ``correction=0``, eps float32's machine
#   epsilon: declared), one minibatch per call (declared ``diagnostic_average = "per-call"``).
#
# ``ObservationNorm`` and ``RewardScaling`` apply a fixed loc and scale (``ObservationNorm.init_stats`` computes them
# once from a rollout): neither keeps running statistics, so neither is an operation of this chapter.
#
# The variant ``vecnorm_v2`` is ``VecNormV2`` (``VecNorm(new_api=True)``): per-environment exponential moving
# averages of x and x^2 (its default ``reduce_batch_dims=False`` keeps statistics shaped like the batch), bias
# corrected by 1 - decay^count, ``std = sqrt(var).clamp_min(eps)``.

import warnings  # noqa: E402

from torch.distributions import Categorical as _TorchCategorical  # noqa: E402
from torchrl.envs.transforms import VecNorm, VecNormV2  # noqa: E402

RLSPEC_CONVENTIONS.update({
    "moments_decay": 0.9999,  # VecNorm(decay=0.9999): sums and count multiplied by the decay at every call
    "normalization_eps": 0.01,  # std = sqrt(clamp_min(var, 1e-4)): max(sqrt(var), 0.01)
    "normalization_eps_form": "max-std",
    "observation_clip": None,
    "reward_clip": None,  # (the variant vecnorm_reward)
    "approx_kl_estimator": "k1",  # kl_approx = (prox_log_prob - log_prob).mean()
    "diagnostic_average": "per-call",  # a loss module's outputs are one minibatch's
    "explained_variance_eps": float(torch.finfo(torch.float32).eps),  # 1 - resid / (total + eps)
    # count starts at 0; shared by the environments of the batch; update then normalise: defaults
})


def _vecnorm(key: str) -> VecNorm:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "VecNorm is to be deprecated": the default users still get
        return VecNorm(in_keys=[key])


def _step_data(key: str, value: torch.Tensor) -> TensorDict:
    return TensorDict({key: value}, batch_size=value.shape[:1])


def running_moments(x, batch_end):
    """VecNorm(in_keys=["observation"]) called on each batch's tensordict; its decayed sums' mean and variance."""
    transform = _vecnorm("observation")
    x = torch.as_tensor(x, dtype=torch.float32)
    start = 0
    for end in torch.nonzero(torch.as_tensor(batch_end)).flatten().tolist():
        transform(_step_data("observation", x[start:end + 1]))
        start = end + 1
    state = transform._td
    count = state.get("observation_count")
    mean = state.get("observation_sum") / count
    return mean, state.get("observation_ssq") / count - mean.pow(2), count.reshape(())


def normalize_observations(obs, train_steps):
    """VecNorm(in_keys=["observation"]) on each step's (N, D) observations; frozen from step train_steps on."""
    transform = _vecnorm("observation")
    obs = torch.as_tensor(obs, dtype=torch.float32)
    out = []
    for t in range(obs.shape[0]):
        if t == train_steps:
            transform.freeze()
        out.append(transform(_step_data("observation", obs[t].clone()))["observation"])
    return torch.stack(out)


def _vecnorm_scale_rewards(rewards, terminated, truncated, gamma):
    """VecNorm(in_keys=["reward"]) on each step's (N, 1) rewards: the reward standardised by its own statistics
    (gamma and the episode ends are unused: VecNorm has neither)."""
    transform = _vecnorm("reward")
    rewards = torch.as_tensor(rewards, dtype=torch.float32)
    return torch.stack([transform(_step_data("reward", rewards[t].clone().unsqueeze(-1)))["reward"].squeeze(-1)
                        for t in range(rewards.shape[0])])


def _per_call(minibatch_end) -> None:
    if minibatch_end is not None:
        raise ValueError("declared diagnostic_average = 'per-call': one minibatch per call")


def diagnostic_approx_kl(logp_new, logp_old, minibatch_end=None):
    """ClipPPOLoss.forward(...)["kl_approx"]."""
    _per_call(minibatch_end)
    zeros = torch.zeros_like(logp_new)
    loss = ClipPPOLoss(_actor(), None, entropy_bonus=False, normalize_advantage=False)
    return loss(_batch(logp_new, logp_old, zeros))["kl_approx"].detach().reshape(())


def diagnostic_clip_fraction(logp_new, logp_old, clip_eps, minibatch_end=None):
    """ClipPPOLoss(clip_epsilon=clip_eps).forward(...)["clip_fraction"]."""
    _per_call(minibatch_end)
    zeros = torch.zeros_like(logp_new)
    loss = ClipPPOLoss(_actor(), None, clip_epsilon=float(clip_eps), entropy_bonus=False, normalize_advantage=False)
    return loss(_batch(logp_new, logp_old, zeros))["clip_fraction"].detach().reshape(())


def diagnostic_entropy(logits, minibatch_end=None):
    """ClipPPOLoss(entropy_bonus=True).forward(...)["entropy"] with a Categorical actor over the suite's logits."""
    _per_call(minibatch_end)
    parameters = TensorDictModule(lambda z: z, in_keys=["logits_in"], out_keys=["logits"])
    actor = ProbabilisticTensorDictSequential(
        parameters, ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"], distribution_class=_TorchCategorical))
    n = logits.shape[0]
    zeros = torch.zeros(n, dtype=logits.dtype)
    log_p = torch.log_softmax(logits, dim=-1)[:, 0].detach()  # the stored log-probability of action 0: ratio 1
    data = TensorDict({"logits_in": logits, "action": torch.zeros(n, dtype=torch.long), "action_log_prob": log_p,
                       "advantage": zeros.unsqueeze(-1)}, batch_size=[n])
    loss = ClipPPOLoss(actor, None, entropy_bonus=True, normalize_advantage=False)
    return loss(data)["entropy"].detach().reshape(())


def diagnostic_explained_variance(values, returns):
    """ClipPPOLoss(critic).forward(...)["explained_variance"] on float32 values and value targets."""
    values, returns = (torch.as_tensor(x, dtype=torch.float32) for x in (values, returns))
    zeros = torch.zeros_like(values)
    loss = ClipPPOLoss(_actor(), _critic(), entropy_bonus=False, normalize_advantage=False)
    return loss(_batch(zeros, zeros, zeros, values=values, returns=returns))["explained_variance"].detach().reshape(())


def _v2_normalize_observations(obs, train_steps):
    """VecNormV2(in_keys=["observation"]): _reset on row 0, then _step per row, as a TransformedEnv calls it."""
    transform = VecNormV2(in_keys=["observation"])
    obs = torch.as_tensor(obs, dtype=torch.float32)
    out = []
    for t in range(obs.shape[0]):
        if t == train_steps:
            transform.freeze()
        data = _step_data("observation", obs[t].clone())
        data = transform._reset(data, data) if t == 0 else transform._step(data, data)
        out.append(data["observation"])
    return torch.stack(out)


vecnorm_reward = SimpleNamespace(
    __doc__="TorchRL's VecNorm on the reward (its default in_keys include it) as scale_rewards: each reward "
            "standardised by the running mean and std of the rewards, no discounted return.",
    scale_rewards=_vecnorm_scale_rewards,
)
vecnorm_v2 = SimpleNamespace(
    __doc__="TorchRL's VecNormV2 (VecNorm(new_api=True), the replacement the deprecation warning announces): per-"
            "environment exponential moving averages of x and x^2 with decay 0.9999, bias corrected, std clamped at 1e-4.",
    normalize_observations=_v2_normalize_observations,
    RLSPEC_CONVENTIONS={**RLSPEC_CONVENTIONS, "normalization_eps": 1e-4, "normalization_scope": "per-environment"},
)
VARIANTS = VARIANTS + ("vecnorm_reward", "vecnorm_v2")

# ---------------------------------------------------------------------------------------------
# compatibility with older releases in RELEASES (nothing here changes what a current release runs)

if not hasattr(TanhNormal, "sample_and_log_prob"):  # TorchRL < 0.14: the code path of this variant does not exist
    tanh_exact_preimage = _variant(tanh_exact_preimage.__doc__ + " (Not in this release: TorchRL 0.14 added it.)")


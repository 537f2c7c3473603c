"""Built-in adapter ``tianshou``: Tianshou 2.0.1 through its real code paths.

    rlspec check --candidate tianshou             # the defaults (below)
    rlspec check --candidate tianshou:dual_clip   # PPO(dual_clip=3.0), declared
    rlspec check --candidate tianshou:td3_actor   # TD3's actor step as the DPG loss

What each operation drives (paths in ``site-packages/tianshou``):

- ``gae``: a real ``VectorReplayBuffer`` with one sub-buffer per environment, filled step by step
  with ``terminated`` / ``truncated`` as Gymnasium reports them, then
  ``Algorithm.compute_episodic_return(batch, buffer, indices, v_s_=V(next obs), v_s=V(obs))`` on
  ``buffer.sample(0)`` -- what ``PPO._preprocess_batch`` runs. Tianshou masks ``v_s_`` with
  ``~terminated`` (no bootstrap at a terminal), cuts the trace at ``terminated | truncated`` and at
  each sub-buffer's unfinished last step, and returns ``(returns, advantages)``.
- ``rewards_to_go``: the same call on one terminated episode with ``v_s_ = v_s = None`` and
  ``gae_lambda = 1`` (its documented Monte Carlo return).
- ``ppo_clip_loss``, ``ppo_value_loss``, ``ppo_entropy_loss``, ``normalize_advantages``: one real
  ``PPO._update_with_batch`` on a hand-built ``Batch`` (the update ``PPO.update`` runs after
  ``_preprocess_batch``), with the algorithm's ``optim.step`` replaced by a recorder: the loss
  Tianshou hands its optimizer is returned unstepped. The actor maps each sample's observation
  (its index) to the suite's log-probability through a distribution that scores the stored action
  with exactly that value (``_GivenLogProb``), and the critic to the suite's values, so gradients
  reach the suite's tensors through Tianshou's own loss. ``normalize_advantages`` is read back from
  that gradient at ratio 1 (``d loss / d logp_i = -A_norm_i / B``). The loss operations take the
  advantages as final, so ``advantage_normalization`` is off for them (it is the operation
  ``normalize_advantages``, and ``ppo_update`` turns it on as the suite's config says); ``vf_coef`` and
  ``ent_coef`` isolate one term (the protocol passes the coefficients).
- ``ppo_update``: ``PPO._update_with_batch`` with the suite's policy, optimizer and config. A
  one-sample minibatch (``minibatch_size`` 1) is normalised to NaN (the std of one element), the NaN
  step poisons the parameters and the next distribution raises; the adapter says so in the error.
- ``ppo_collected_ratios``: the collection path and the loss together. The policy a Tianshou user builds
  (``DiscreteActorPolicy`` with ``Categorical`` logits, or ``ProbabilisticActorPolicy`` with an
  ``Independent(Normal)`` and action bound method ``"tanh"`` for the squashed family) acts in every state
  as ``Collector`` calls it, the raw action goes into a ``ReplayBuffer`` (``map_action`` squashes only on
  the way to the environment), ``PPO._preprocess_batch`` stores log pi_old of the stored actions, and the
  first ``_update_with_batch`` minibatch's ratios are read before its (recorded, untaken) step.
- ``conjugate_gradient``, ``fisher_vector_product``: ``NPG._conjugate_gradients`` and ``NPG._MVP`` (its
  damping 0.1). ``trpo_update``: TRPO with its defaults, ``_preprocess_batch`` (log pi_old, then the
  advantages standardised over the batch without an epsilon, declared ``trpo_advantage_normalization``)
  and one ``_update_with_batch``; only its GAE stage (``_add_returns_and_advantages``) answers with the
  suite's advantages. Variant ``npg``: NPG's natural step through the same two methods.
- ``tanh_gaussian_log_prob``: ``SACPolicy.forward``'s two lines with the draw fixed to the suite's
  pre-tanh action: ``Independent(Normal)`` log-density, then the public
  ``correct_log_prob_gaussian_tanh`` (the epsilon form ``log(1 - tanh(u)^2 + float32 eps)``).

Off-policy (algorithm/modelfree/ddpg.py, td3.py, sac.py). The suite's torch modules go into Tianshou's
algorithms in Tianshou's layouts: the actor as ``forward(obs, state, info) -> (actions, state)``
(``_DeterministicActor``), each critic returning ``(B, 1)`` like ``ContinuousCritic`` (``_Critic``), SAC's policy
returning ``((loc, scale), state)`` like ``ContinuousActorProbabilistic`` (``_GaussianActor``); observations are
cast to the module's dtype as Tianshou's nets cast to float32. The suite's target networks are loaded
(``load_state_dict``) into the algorithm's lagged networks (``actor_old``, ``critic_old``, ``critic2_old``, deep
copies Tianshou makes of the online ones). Everything the protocol does not pass keeps Tianshou's default.

- ``td_target``: ``Algorithm.compute_nstep_return`` (n_step 1, the default) on a ``ReplayBuffer`` holding the rows
  (``ReplayBuffer.from_data``, ``done = terminated | truncated``), its ``target_q_fn`` answering ``next_q``:
  Tianshou multiplies it by ``value_mask = ~terminated`` and adds the reward in its ``_nstep_return`` kernel.
- ``ddpg_critic_target``, ``td3_critic_target``, ``sac_critic_target``: the algorithm's ``_preprocess_batch`` on
  that buffer (``compute_nstep_return`` with its ``_target_q`` at ``obs_next``), inside
  ``policy_within_training_step`` as ``Algorithm._update`` runs it (SAC samples there, not the mode). TD3 runs
  with ``policy_noise = 1`` and ``torch.randn`` (td3.py's, for the call) returning the suite's noise, which is
  already scaled; its ``noise_clip`` is the protocol's, clamped only when positive (0 disables the clip:
  ``tianshou.xfail``); ``low`` / ``high`` go nowhere, as TD3 never clips the target action (bugs-found). SAC's
  ``rsample`` draws the suite's standard normal noise (``torch.distributions.normal._standard_normal``, for the
  call); ``alpha`` is a ``FixedAlpha``.
- ``dpg_actor_loss``: one ``DDPG._update_with_batch`` (zero actions and returns in the batch) with the optimizers'
  ``step`` recorded: the loss handed to ``policy_optim``, ``-critic(obs, policy(batch).act).mean()``, comes back
  unstepped. Variant ``td3_actor``: ``TD3._update_with_batch``'s (its first step updates the actor).
- ``sac_actor_loss``: one ``SAC._update_with_batch`` the same way: ``(alpha * log_prob - min(Q1, Q2)).mean()``
  through ``SACPolicy.forward`` with the suite's noise. Both actor losses reach the critics' live parameters
  (declared ``actor_loss_critic_gradient = "discarded"``).
- ``sac_alpha_loss``: one ``SAC._update_with_batch`` with an ``AutoAlpha``: SAC passes ``-log_prob.detach()``
  to ``AutoAlpha.update``, which builds ``-(log_alpha * (target_entropy - entropy)).mean()`` and calls
  ``backward()`` itself. The policy's sample is given (``_GivenSample``: the suite's ``log_prob``), the
  ``AutoAlpha``'s log_alpha is the suite's leaf viewed as ``_BackwardRecorded`` (its ``backward()`` recorded, not
  run, so the loss keeps its graph). ``target_entropy=None``: ``AutoAlphaFactoryDefault`` of the high-level API
  (``-1 * dim(A)``; ``AutoAlpha`` itself has no default).
- ``polyak_update``: ``LaggedNetworkCollection.polyak_parameter_update(tau)`` on a lagged copy holding
  ``target``; ``target_network_updates``: ``TD3._update_with_batch`` once per gradient step (Tianshou counts
  steps on the algorithm, ``_cnt``, so the calls' grouping does not enter), ``update_actor_freq = period``, the
  critic's "step" setting it to ``online[n - 1]``, the lagged critic read after each; ``period = 1`` is DDPG's and
  SAC's every-step update, ``tau = 1`` a copy. Parameters are float32, as a Tianshou network's.
- ``td3_actor_update_steps``: the same TD3 loop (``update_actor_freq = policy_delay``): whether each step called
  ``policy_optim.step`` and ``_update_lagged_network_weights``.

Offline (algorithm/imitation/). Tianshou 2.0.1 has no IQL: ``expectile_loss`` and ``iql_targets`` are not
provided. Each loss is one ``_update_with_batch`` per state (their losses are batch means), optimizer steps
recorded.

- ``cql_penalty``: ``DiscreteCQL`` (``min_q_weight = alpha``; 200 quantiles, each equal to the suite's Q(s, a), so
  ``compute_q_value`` is Q) with the quantile regression target equal to the data action's quantiles: its loss
  is exactly 0 and the step's loss is ``min_q_weight * (logsumexp(q) - q[a])``. Variant ``crr_regulariser``:
  ``DiscreteCRR``'s same term (``min_q_weight = alpha``, a policy on the data action, so its actor term is 0).
- ``cql_sampled_penalty``: ``CQL`` (``num_repeat_actions = R``, ``cql_weight = alpha``, ``temperature = T``,
  ``with_lagrange=False``: the protocol's weight is fixed; ``calibrated=True`` with calibration returns -inf, so
  Cal-QL's bound never binds), the first critic's recorded loss. CQL scores R uniform draws, R policy samples at s
  and R at s'; a lookup critic (``_SampledQ``) and policy (``_SampledPolicy``) answer the suite's Q's and
  log-densities there: N uniform and M policy samples fill R = max(N, ceil(M / 2)) slots of each (the policy's at s
  first), a slot left over holds Q = -inf (weight 0 under the declared sum normalisation), and the TD term is 0
  (the target is ``rew = q_data`` with ``done``). The box enters nowhere: CQL's density is ``log(0.5 ** D)``.
- ``awr_loss``: ``DiscreteCRR`` (``policy_improvement_mode="exp"``, ``beta``, ``ratio_upper_bound`` 20,
  ``min_q_weight = 0`` to leave out its CQL term) on two actions: the critic answers ``Q(s, .) = [A, 0]`` and the
  distribution CRR builds (``Categorical`` in discrete_crr.py, ``_GivenCategorical`` for the call) gives the data
  action the suite's log-probability and takes ``E_pi[Q]`` on action 1, so CRR's advantage is exactly A.

Precision: ``_update_with_batch`` casts the ratios to float32 (``.exp().float()``, ppo.py:187)
whatever the data's dtype, so the PPO terms are judged by float32 bounds
(``RLSPEC_PRECISION = "float32"``); its GAE kernel computes in float64. The off-policy and offline
operations compute in the suite's dtype (CQL's Q's in float32, as its float32 critics give them).

Conventions: no 0.5 on the value loss (``vf_coef`` is the only factor; the adapter sets it to 1);
advantages normalised per minibatch with the unbiased std plus 1e-8; the value clip radius is
``eps_clip``; no dual clip unless declared (variant ``dual_clip``). Off-policy: TD3's delayed updates on
steps 1, d + 1, ... (``update_phase = "start"``), the SAC epsilon, the temperature in log_alpha with
target entropy -dim(A). Offline: CQL's sum-normalised, density-inside logsumexp; CRR's ``exp(A / beta)``
clipped at 20. Declared deviations are in ``tianshou.xfail`` beside this file.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import tianshou
import torch
import torch.distributions.normal as normal_module
from tianshou.algorithm import CQL, DDPG, NPG, PPO, SAC, TD3, TRPO, DiscreteCQL, DiscreteCRR
from tianshou.algorithm import algorithm_base
from tianshou.algorithm.algorithm_base import Algorithm
from tianshou.algorithm.imitation import discrete_crr as crr_module
from tianshou.algorithm.modelfree import td3 as td3_module
from tianshou.algorithm.modelfree.ddpg import ContinuousDeterministicPolicy
from tianshou.algorithm.modelfree.qrdqn import QRDQNPolicy
from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy, ProbabilisticActorPolicy
from tianshou.algorithm.modelfree.sac import Alpha, AutoAlpha, SACPolicy, correct_log_prob_gaussian_tanh
from tianshou.algorithm.optim import AdamOptimizerFactory, OptimizerFactory
from tianshou.data import Batch, ReplayBuffer, VectorReplayBuffer, to_numpy
from tianshou.utils.lagged_network import LaggedNetworkCollection
from tianshou.utils.torch_utils import policy_within_training_step
from torch.distributions import Categorical, Distribution, Independent, Normal, kl_divergence, register_kl

# Every Tianshou policy JIT-compiles these numba kernels when the first one is built (about 6 s,
# 30 s and more on a loaded 2-core machine, which the suite's per-clause time limit would count
# against the first clause). numba's on-disk cache (beside Tianshou's sources) keeps them
# compiled across processes; it changes nothing in what they compute.
for _kernel in (algorithm_base._gae, algorithm_base._nstep_return):
    _kernel.enable_caching()

# Creating a torch optimizer (every Tianshou algorithm does) imports torch._dynamo the first time, which sets
# TORCHINDUCTOR_CACHE_DIR and adds warnings filters: imported here, with the adapter, that stays out of the calls.
import torch._dynamo  # noqa: E402,F401

RLSPEC_ARRAY = "numpy"
RLSPEC_PRECISION = "float32"  # PPO ratios are cast to float32 (see the module docstring)
# The releases this adapter drives (``rlspec matrix --releases`` reads it without importing the library; docs/releases.md).
RELEASES = {
    "distribution": "tianshou",
    "range": ">=2.0.0",
    "why": "2.0.0 split Tianshou's policies into Algorithm and Policy classes, the API every operation here drives; "
           "1.x has the former BasePolicy API",
}
RLSPEC_VERSION = f"tianshou {tianshou.__version__}"
RLSPEC_CONVENTIONS = {
    "dual_clip": None,  # PPO(dual_clip=None) by default
    "value_loss_factor": 1.0,  # (returns - value)^2, no 0.5 (ppo.py:204-208)
    "advantage_std_ddof": 1,  # torch's unbiased std
    "advantage_eps": 1e-8,  # (A - mean) / (std + 1e-8), a2c.py:113
    "advantage_eps_form": "std",
    "advantage_normalization": "minibatch",  # inside _update_with_batch
    "value_clipping": "none",  # PPO(value_clip=False) by default (ppo.py:27); variant value_clip: clipped by eps_clip
    "minibatch_remainder": "merged",  # Batch.split(size, merge_last=True) (ppo.py:179): the remainder joins the last one
    "damping": 0.1,  # NPG._damping: the MVP is (F + 0.1 I) v, and TRPO scales its step with it
    "backtrack_factor": 0.8,  # TRPO(backtrack_coeff=0.8)
    # line_search_kl: "strict" (accepts when kl < max_kl and the loss went down)
    # NPG/TRPO(advantage_normalization=True), npg.py:136-137: (A - mean) / std, no epsilon, over the whole batch
    "trpo_advantage_normalization": "batch",
    # off-policy (90_offpolicy.toml)
    "update_phase": "start",  # TD3: `if self._cnt % self.update_actor_freq == 0: ...` before `self._cnt += 1`
    "target_update_kinds": ["polyak", "hard"],  # _update_lagged_network_weights with any tau in [0, 1]
    "actor_loss_critic_gradient": "discarded",  # Optimizer.step zeroes the critic's gradients before its own step
    "tanh_log_prob_eps": float(np.finfo(np.float32).eps),  # correct_log_prob_gaussian_tanh's default eps
    "alpha_loss_parameter": "log_alpha",  # AutoAlpha.update: -(log_alpha * (target_entropy - entropy)).mean()
    "default_target_entropy_per_dim": -1.0,  # AutoAlphaFactoryDefault(target_entropy_coefficient=-1.0) * dim(A)
    # offline (95_offline.toml)
    "cql_sampled_normalisation": "sum",  # CQL: logsumexp of the concatenated samples, no log n
    "cql_temperature_form": "density-inside",  # CQL: logsumexp(cat_q / temperature) * temperature, cat_q = Q - log p
    "awr_beta": "temperature",  # DiscreteCRR: exp(advantage / beta)
    "awr_max_weight": 20.0,  # DiscreteCRR(ratio_upper_bound=20.0): .exp().clamp(0, ratio_upper_bound)
}


# ---------------------------------------------------------------------------------------------
# gae and rewards_to_go through a real buffer


def _fill(rewards, terminated, truncated) -> tuple[ReplayBuffer, Batch, np.ndarray]:
    """A real buffer holding the (T, N) rollout; returns ``buffer.sample(0)`` (every transition).

    N > 1: a ``VectorReplayBuffer`` with one sub-buffer per environment, filled by ``add`` step by
    step as a collector does. N = 1: one ``ReplayBuffer`` filled at once by ``ReplayBuffer.from_data``
    (``add`` costs about 0.2 ms a step, too slow for the suite's 100000-step rollouts), with
    ``done = terminated | truncated`` as ``add`` would store it. Each observation is ``[t, env]``, so
    the sampled batch says where every row came from.
    """
    T, N = rewards.shape
    position = lambda t, env: np.stack(np.broadcast_arrays(t, env), axis=-1).astype(float)
    if N == 1:
        steps = np.arange(T)
        buffer = ReplayBuffer.from_data(
            obs=position(steps, 0), act=np.zeros(T), rew=rewards[:, 0], terminated=terminated[:, 0],
            truncated=truncated[:, 0], done=terminated[:, 0] | truncated[:, 0], obs_next=position(steps + 1, 0),
        )
    else:
        buffer = VectorReplayBuffer(T * N, N)
        for t in range(T):
            step = Batch(obs=position(t, np.arange(N)), act=np.zeros(N), rew=rewards[t], terminated=terminated[t],
                         truncated=truncated[t], obs_next=position(t + 1, np.arange(N)), info=[{}] * N)
            buffer.add(step, buffer_ids=np.arange(N))
    batch, indices = buffer.sample(0)
    return buffer, batch, indices


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    column = lambda x: x[:, None] if x.ndim == 1 else x  # (T,) -> (T, 1)
    r, v, nv = column(rewards), column(values), column(next_values)
    buffer, batch, indices = _fill(r, column(terminated), column(truncated))
    t, env = batch.obs[:, 0].astype(int), batch.obs[:, 1].astype(int)
    returns, advantages = Algorithm.compute_episodic_return(
        batch, buffer, indices, v_s_=nv[t, env], v_s=v[t, env], gamma=gamma, gae_lambda=lam
    )
    out_adv, out_ret = np.empty(r.shape, dtype=advantages.dtype), np.empty(r.shape, dtype=returns.dtype)
    out_adv[t, env], out_ret[t, env] = advantages, returns
    return (out_adv[:, 0], out_ret[:, 0]) if rewards.ndim == 1 else (out_adv, out_ret)


def rewards_to_go(rewards, gamma):
    T = len(rewards)
    ends = np.zeros((T, 1), dtype=bool)
    ends[-1] = True  # one episode that terminates at its last step
    buffer, batch, indices = _fill(rewards[:, None], ends, np.zeros((T, 1), dtype=bool))
    returns, _ = Algorithm.compute_episodic_return(batch, buffer, indices, v_s_=None, v_s=None, gamma=gamma, gae_lambda=1.0)
    out = np.empty(T, dtype=returns.dtype)
    out[batch.obs[:, 0].astype(int)] = returns
    return out


# ---------------------------------------------------------------------------------------------
# PPO: one real _update_with_batch on a controlled policy and critic


class _GivenLogProb(Distribution):
    """Gives every action the log-probability ``logp`` and the entropy ``entropy``."""

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, logp, entropy):
        self.logp, self._entropy = logp, entropy
        super().__init__(batch_shape=logp.shape, validate_args=False)

    def log_prob(self, value):
        return self.logp.expand(value.shape)

    def sample(self, sample_shape=torch.Size()):
        return torch.zeros(torch.Size(sample_shape) + self.batch_shape, dtype=self.logp.dtype)

    def entropy(self):
        return self._entropy


class _Lookup(torch.nn.Module):
    """obs (the sample's index) -> the suite's tensors at that index, through autograd."""

    def __init__(self, *tensors, actor: bool):
        super().__init__()
        self.tensors, self.actor = tensors, actor
        self.unused = torch.nn.Parameter(torch.zeros(1))  # Tianshou builds an optimizer over the parameters

    def forward(self, obs, state=None, info=None):
        index = torch.as_tensor(obs, dtype=torch.long).reshape(-1)
        picked = tuple(t[index] for t in self.tensors)
        return (picked, state) if self.actor else picked[0]


def _update(logp_new, logp_old, advantages, *, entropy=None, values=None, returns=None, old_values=None, **options):
    """PPO(**options)._update_with_batch on the whole batch once; returns the loss it stepped on."""
    n = logp_new.shape[0]
    zeros = torch.zeros(n, dtype=logp_new.dtype)
    entropy = zeros if entropy is None else entropy
    values = zeros if values is None else values
    policy = ProbabilisticActorPolicy(
        actor=_Lookup(logp_new, entropy, actor=True),
        dist_fn=lambda parameters: _GivenLogProb(*parameters),
        action_space=gym.spaces.Box(-1.0, 1.0, (1,)),
        action_scaling=False,
        action_bound_method=None,
    )
    algorithm = PPO(policy=policy, critic=_Lookup(values, actor=False), optim=AdamOptimizerFactory(), **options)
    stepped = []
    algorithm.optim.step = lambda loss, *args, **kwargs: stepped.append(loss)  # record, do not step
    batch = Batch(
        obs=np.arange(n),
        act=zeros.detach(),
        logp_old=logp_old.detach(),
        adv=advantages.detach(),
        returns=(zeros if returns is None else returns).detach(),
        v_s=(zeros if old_values is None else old_values).detach(),
        info=Batch(),
    )
    algorithm._update_with_batch(batch, batch_size=None, repeat=1)
    (loss,) = stepped
    return loss


_PPO = {"advantage_normalization": False, "vf_coef": 0.0, "ent_coef": 0.0}


def _clip_loss(dual_clip):
    def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
        return _update(logp_new, logp_old, advantages, **{**_PPO, "eps_clip": clip_eps, "dual_clip": dual_clip})

    return ppo_clip_loss


ppo_clip_loss = _clip_loss(None)


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    clipped = old_values is not None and clip_eps is not None
    zeros = torch.zeros_like(values).detach()
    options = {**_PPO, "vf_coef": 1.0, "value_clip": clipped, "eps_clip": clip_eps if clipped else 0.2}
    return _update(zeros, zeros, zeros, values=values, returns=returns, old_values=old_values if clipped else None, **options)


def ppo_entropy_loss(entropy, coef):
    zeros = torch.zeros_like(entropy).detach()
    return _update(zeros, zeros, zeros, entropy=entropy, **{**_PPO, "ent_coef": float(coef)})


def normalize_advantages(advantages):
    """PPO's per-minibatch normalisation at ratio 1: loss = -mean(A_norm), so A_norm = -B dloss/dlogp.

    The gradient passes Tianshou's float32 ratio, so the values come back as float32."""
    n = advantages.shape[0]
    logp = torch.zeros(n, dtype=torch.float64, requires_grad=True)
    with torch.enable_grad():
        loss = _update(logp, logp.detach(), torch.as_tensor(advantages, dtype=torch.float64),
                       **{**_PPO, "advantage_normalization": True})
        (grad,) = torch.autograd.grad(loss, logp)
    return (-n * grad).float().numpy()


# ---------------------------------------------------------------------------------------------
# a whole PPO update: PPO._update_with_batch (or PPO.update) with the suite's policy and optimizer


class _GivenOptimizer(OptimizerFactory):
    """The factory Tianshou builds its optimizer with, handing back the optimizer the suite gave."""

    def __init__(self, optimizer):
        super().__init__()
        self.optimizer = optimizer

    def _create_optimizer_for_params(self, params):
        return self.optimizer


class _SuiteHead(torch.nn.Module):
    """The suite's ``policy(obs) -> (dist, values)`` as Tianshou's actor or critic. A Batch's ``obs`` is the row's
    index (Tianshou splits and shuffles whatever a Batch holds): the actor hands the indices to ``dist_fn``, which
    evaluates the suite's module on those rows of the batch's observations; the critic returns the module's values
    there. Both hold the module itself, so its parameters are the algorithm's (one optimizer, one gradient norm)."""

    def __init__(self, policy, obs, critic: bool):
        super().__init__()
        self.policy, self.critic = policy, critic
        self.obs = obs

    def forward(self, index, state=None, info=None):
        index = torch.as_tensor(index, dtype=torch.long).reshape(-1)
        if self.critic:
            return self.policy(self.obs[index])[1].flatten()
        return index.to(self.obs.dtype), state


def _joint(dist, actions):
    """Tianshou's dist_fn returns the joint distribution of an action (``Independent`` over its
    dimensions for a Gaussian): a per-dimension one is wrapped, as a Tianshou user would."""
    if actions.ndim > 1 and len(dist.event_shape) == 0:
        return torch.distributions.Independent(dist, 1)
    return dist


def _ppo(policy, optimizer, obs, actions, config, value_clip: bool) -> PPO:
    """PPO with the protocol's hyperparameters at their Tianshou names, everything else at Tianshou's defaults
    (``value_clip=False``, ``dual_clip=None``, ``recompute_advantage=False``)."""
    actor_policy = ProbabilisticActorPolicy(
        actor=_SuiteHead(policy, obs, critic=False),
        dist_fn=lambda index: _joint(policy(obs[index.long()])[0], actions),
        action_space=gym.spaces.Box(-1.0, 1.0, (1,)),
        action_scaling=False,
        action_bound_method=None,
    )
    return PPO(
        policy=actor_policy, critic=_SuiteHead(policy, obs, critic=True), optim=_GivenOptimizer(optimizer),
        eps_clip=config["clip_eps"], vf_coef=config["vf_coef"], ent_coef=config["ent_coef"],
        max_grad_norm=config["max_grad_norm"], advantage_normalization=bool(config["normalize_advantages"]),
        value_clip=value_clip,
    )


def _one_sample_nan(config, n: int):
    singleton = bool(config["normalize_advantages"]) and (int(config["minibatch_size"]) == 1 or n == 1)
    return _nan_explained(singleton, "PPO normalised a one-sample minibatch: (A - mean) / (std + 1e-8) with the unbiased "
                                     "std of one element is NaN (ppo.py:184-186), so the loss and the step are NaN and the "
                                     "next minibatch's distribution has NaN parameters")


def _ppo_update(value_clip: bool):
    def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
        """``PPO._update_with_batch(batch, batch_size=minibatch_size, repeat=epochs)`` on the batch ``_preprocess_batch``
        hands it (``logp_old``, ``adv``, ``returns``, ``v_s``), stepping the suite's optimizer through Tianshou's own
        ``Optimizer.step`` (zero_grad, backward, ``clip_grad_norm_`` over the module's parameters, step). Minibatches
        come from ``Batch.split(size, merge_last=True)`` (shuffled with ``np.random``); no KL early stop. Returns
        Tianshou's training statistics, which the suite does not read."""
        n = len(obs)
        algorithm = _ppo(policy, optimizer, obs, actions, config, value_clip)
        batch = Batch(obs=np.arange(n), act=actions, logp_old=logp_old.detach(), adv=advantages.detach(),
                      returns=returns.detach(), v_s=values_old.detach(), info=Batch())
        with torch.enable_grad(), _one_sample_nan(config, n):
            return algorithm._update_with_batch(batch, batch_size=int(config["minibatch_size"]), repeat=int(config["epochs"]))

    return ppo_update


ppo_update = _ppo_update(value_clip=False)


def _ppo_update_from_buffer(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    """``PPO.update(buffer, batch_size, repeat)`` as ``OnPolicyTrainer`` calls it, inside ``policy_within_training_step``:
    a ``ReplayBuffer`` holding the batch (one episode, its rows' indices as observations), ``_preprocess_batch`` with
    only its GAE stage (``_add_returns_and_advantages``) answering the suite's advantages, returns and values_old;
    log pi_old is Tianshou's own, the policy's at the start of the update (ppo.py:157-161), not the stored one."""
    n = len(obs)
    algorithm = _ppo(policy, optimizer, obs, actions, config, value_clip=False)

    def given(batch, buffer, indices):
        batch.adv, batch.returns, batch.v_s = advantages.detach().clone(), returns.detach().clone(), values_old.detach().clone()
        return batch

    algorithm._add_returns_and_advantages = given
    buffer = ReplayBuffer(n)
    act = actions.detach().cpu().numpy()
    for t in range(n):
        buffer.add(Batch(obs=t, act=act[t], rew=0.0, terminated=t == n - 1, truncated=False, obs_next=t, info={}))
    with torch.enable_grad(), _one_sample_nan(config, n), policy_within_training_step(algorithm.policy):
        return algorithm.update(buffer, batch_size=int(config["minibatch_size"]), repeat=int(config["epochs"]))


# ---------------------------------------------------------------------------------------------
# natural gradient and TRPO (algorithm/modelfree/npg.py, trpo.py)


class _Rows(Distribution):
    """The rows ``index`` of a batch distribution: Tianshou shuffles each minibatch (``Batch.split``),
    and the actor sees each row's index as its observation, so the policy answers row by row."""

    arg_constraints: dict = {}

    def __init__(self, base, index):
        self.base, self.index = base, index
        super().__init__(batch_shape=index.shape, validate_args=False)

    def log_prob(self, value):
        restored = torch.empty_like(value)
        restored[self.index] = value  # back to the base's row order
        return self.base.log_prob(restored)[self.index]

    def sample(self, sample_shape=torch.Size()):
        return self.base.sample(sample_shape).index_select(len(sample_shape), self.index)


@register_kl(_Rows, _Rows)
def _kl_rows(p, q):
    return kl_divergence(p.base, q.base)[p.index]


class _Parameters(torch.nn.Module):
    """Actor whose parameters are the suite's flat ``params``; it outputs them with the row indices."""

    def __init__(self, params):
        super().__init__()
        self.theta = torch.nn.Parameter(params.detach().clone())

    def forward(self, obs, state=None, info=None):
        """(B, P + 1): theta on every row (Tianshou stores the output as one tensor), then the row's index."""
        index = torch.as_tensor(obs, dtype=self.theta.dtype).reshape(-1, 1)
        return torch.cat([self.theta.expand(len(index), -1), index], dim=1), state


class _ConstantCritic(torch.nn.Module):
    """V(s) = w = 0 for every state: TRPO fits its critic after the actor step; this one is inert."""

    def __init__(self, dtype):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1, dtype=dtype))

    def forward(self, obs, state=None, info=None):
        return self.w.expand(len(obs))


def _natural_gradient(algorithm_class, policy, params, n, **options):
    """An NPG / TRPO instance whose actor holds ``params`` and whose policy is the suite's ``policy``."""
    actor_policy = ProbabilisticActorPolicy(
        actor=_Parameters(params),
        dist_fn=lambda out: _Rows(policy(out[0, :-1]), out[:, -1].long()),
        action_space=gym.spaces.Box(-1.0, 1.0, (1,)),
        action_scaling=False,
        action_bound_method=None,
    )
    critic = _ConstantCritic(params.dtype)
    return algorithm_class(policy=actor_policy, critic=critic, optim=AdamOptimizerFactory(), **options)


def conjugate_gradient(matvec, b, iters, tol):
    """NPG._conjugate_gradients with the instance's MVP replaced by ``matvec`` (CG alone; Tianshou's
    own MVP adds its damping) and ``residual_tol = tol``, Tianshou's threshold on r'r."""
    b = torch.as_tensor(b)
    algorithm = _natural_gradient(NPG, lambda theta: None, torch.zeros(1, dtype=b.dtype), 1, advantage_normalization=False)
    algorithm._MVP = lambda v, flat_kl_grad: torch.as_tensor(matvec(v), dtype=v.dtype)
    return algorithm._conjugate_gradients(b.clone(), None, nsteps=int(iters), residual_tol=float(tol))


def fisher_vector_product(policy, params, v):
    """NPG._MVP: the Hessian-vector product of mean KL(pi_params || pi_theta) at theta = params, by
    double backward through Tianshou's _get_flat_grad, plus Tianshou's damping."""
    batch = Batch(obs=np.arange(_batch_size(policy, params)), info=Batch())
    algorithm = _natural_gradient(NPG, policy, params, len(batch.obs), advantage_normalization=False)
    with torch.enable_grad():
        dist = algorithm.policy(batch).dist
        with torch.no_grad():
            old = algorithm.policy(batch).dist
        flat_kl_grad = algorithm._get_flat_grad(kl_divergence(old, dist).mean(), algorithm.policy.actor, create_graph=True)
        return algorithm._MVP(torch.as_tensor(v, dtype=params.dtype), flat_kl_grad)


@contextlib.contextmanager
def _nan_explained(known: bool, why: str):
    """When ``known`` (the inputs reach Tianshou's 0/0), an exception from inside the library says why:
    torch's complaint about NaN distribution parameters names the symptom, not the cause."""
    try:
        yield
    except ValueError as exc:
        if not known:
            raise
        raise ValueError(f"Tianshou's {why} ({str(exc).splitlines()[0]})") from exc


def _given_advantages(algorithm, advantages, dtype):
    """``algorithm._add_returns_and_advantages`` (the GAE stage of ``_preprocess_batch``) answering with the
    suite's advantages: everything after it in ``_preprocess_batch`` is Tianshou's."""

    def add(batch, buffer, indices):
        n = len(batch.obs)
        batch.adv = torch.as_tensor(advantages, dtype=dtype).detach().clone()
        batch.returns, batch.v_s = torch.zeros(n, dtype=dtype), torch.zeros(n, dtype=dtype)
        return batch

    algorithm._add_returns_and_advantages = add


def trpo_update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks):
    """TRPO with its defaults: ``_preprocess_batch`` (log pi_old = log pi_params(a), then the advantages
    standardised over the batch, ``(A - mean) / std``, npg.py:136-137) and one ``_update_with_batch`` on
    the whole batch; returns the actor's parameters after it. Only the GAE stage is the suite's (its
    advantages). Tianshou runs 10 CG steps whatever ``cg_iters`` says (trpo.py:150)."""
    n = len(actions)
    algorithm = _natural_gradient(TRPO, policy, params, n, max_kl=float(max_kl), max_backtracks=int(max_backtracks),
                                  optim_critic_iters=1)
    _given_advantages(algorithm, advantages, params.dtype)
    batch = Batch(obs=np.arange(n), act=actions, info=Batch())
    batch = algorithm._preprocess_batch(batch, buffer=None, indices=np.arange(n))
    flat = torch.as_tensor(advantages).reshape(-1)
    constant = bool(torch.all(flat == flat[0]))
    with torch.enable_grad(), _nan_explained(constant, "TRPO standardised constant advantages: (A - mean) / std with std 0 "
                                             "and no epsilon is 0/0 = NaN (npg.py:136-137), so the search direction is NaN "
                                             "and the line search's first trial has NaN parameters"):
        algorithm._update_with_batch(batch, batch_size=None, repeat=1)
    return algorithm.policy.actor.theta.detach().clone()


def _npg_natural_step(grad, fvp, max_kl, cg_iters):
    """NPG with its defaults (``_preprocess_batch`` standardises the advantages, then one
    ``_update_with_batch``) on a policy whose Fisher is the suite's F and whose policy gradient is
    ``grad``: two samples of N(L' theta, I) with F = L L' (so mean KL(old || new) = 1/2 d' F d), actions
    +-sqrt(2) L^-1 grad and advantages +1, -1, which standardise to +-1/sqrt(2), at theta = 0. NPG steps
    trust_region_size (0.5) times the damped natural direction; it never reads ``max_kl``, and runs 10
    CG steps whatever ``cg_iters`` says."""
    g = np.asarray(grad, dtype=np.float64)
    n = len(g)
    F = np.column_stack([np.asarray(fvp(e), dtype=np.float64) for e in np.eye(n)])
    L = torch.as_tensor(np.linalg.cholesky((F + F.T) / 2))
    policy = lambda theta: torch.distributions.Independent(torch.distributions.Normal((L.T @ theta)[None].expand(2, n), 1.0), 1)
    theta0 = torch.zeros(n, dtype=torch.float64)
    algorithm = _natural_gradient(NPG, policy, theta0, 2, optim_critic_iters=1)
    # the gradient mean_i A_i L a_i with A = +-1/sqrt(2) and a = +-sqrt(2) L^-1 g is g
    action = math.sqrt(2.0) * torch.linalg.solve_triangular(L, torch.as_tensor(g)[:, None], upper=False).T  # (1, n)
    _given_advantages(algorithm, [1.0, -1.0], torch.float64)
    batch = algorithm._preprocess_batch(Batch(obs=np.arange(2), act=torch.cat([action, -action]), info=Batch()),
                                        buffer=None, indices=np.arange(2))
    with torch.enable_grad():
        algorithm._update_with_batch(batch, batch_size=None, repeat=1)
    return (algorithm.policy.actor.theta.detach() - theta0).numpy().astype(np.asarray(grad).dtype)


def _batch_size(policy, params) -> int:
    return policy(params.detach()).batch_shape[0]


# ---------------------------------------------------------------------------------------------
# SAC's squashed Gaussian (algorithm/modelfree/sac.py)


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    """``SACPolicy.forward``'s log-probability with its draw fixed to ``pre_tanh``: the log-density of
    ``Independent(Normal(loc, scale), 1)`` at the pre-tanh action, then the public
    ``correct_log_prob_gaussian_tanh(log_prob, tanh(u))``, which subtracts
    ``sum_d log(1 - tanh(u)^2 + eps)`` with ``eps = np.finfo(np.float32).eps`` (sac.py:25-39)."""
    mean, log_std, u = (torch.as_tensor(x) for x in (mean, log_std, pre_tanh))
    dist = Independent(Normal(loc=mean, scale=log_std.exp()), 1)
    log_prob = dist.log_prob(u).unsqueeze(-1)
    return correct_log_prob_gaussian_tanh(log_prob, torch.tanh(u)).squeeze(-1)


# ---------------------------------------------------------------------------------------------
# PPO on Tianshou's own collected batch: the collector's action, PPO._preprocess_batch's log pi_old


class _FirstLogProb:
    """Records the log-probabilities of the first minibatch Tianshou scores, before any step."""

    def __init__(self):
        self.logp, self.index = None, None

    def wrap(self, dist, index):
        recorder, log_prob = self, dist.log_prob

        def recorded(value):
            out = log_prob(value)
            if recorder.logp is None:
                recorder.logp, recorder.index = out.detach().clone(), index
            return out

        dist.log_prob = recorded
        return dist


class _DescribedActor(torch.nn.Module):
    """The policy the suite describes per state: obs (the state's row) -> its logits, or its ``(loc, scale)``, as
    Tianshou's actors return them with the hidden state."""

    def __init__(self, loc, scale):
        super().__init__()
        self.loc, self.scale = loc.detach().clone(), None if scale is None else scale.detach().clone()
        self.unused = torch.nn.Parameter(torch.zeros(1))  # Tianshou builds an optimizer over the parameters

    def forward(self, obs, state=None, info=None):
        self.rows = rows = torch.as_tensor(obs, dtype=torch.long).reshape(-1)  # the states of the last call
        return (self.loc[rows] if self.scale is None else (self.loc[rows], self.scale[rows])), state


class _ZeroCritic(torch.nn.Module):
    """V = 0 in the policy's dtype (PPO casts the stored actions to the critic's dtype, ``to_torch_as``)."""

    def __init__(self, dtype):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1, dtype=dtype))

    def forward(self, obs, state=None, info=None):
        return self.w.expand(len(obs))


def _described_policy(family, loc, scale):
    """The policy a Tianshou user builds for the family: ``DiscreteActorPolicy`` (``Categorical(logits)``), or
    ``Independent(Normal(loc, scale), 1)`` on a Box with the default action scaling, its bound method ``"tanh"`` for
    the squashed policy (``map_action`` squashes on the way to the environment; the buffer keeps the raw draw)."""
    K = loc.shape[1]
    if family == "categorical":
        return DiscreteActorPolicy(actor=_DescribedActor(loc, None), dist_fn=lambda logits: Categorical(logits=logits),
                                   action_space=gym.spaces.Discrete(K))
    return ProbabilisticActorPolicy(actor=_DescribedActor(loc, scale),
                                    dist_fn=lambda parameters: Independent(Normal(*parameters), 1),
                                    action_space=gym.spaces.Box(-1.0, 1.0, (K,)),
                                    action_bound_method="tanh" if family == "tanh_gaussian" else "clip")


def ppo_collected_ratios(family, loc, scale, seed):
    """What ``Collector`` does per step (``policy(Batch(obs, info))``, the raw ``act`` into the buffer, ``map_action``
    only for the environment) on one step in every state, the rows into a ``ReplayBuffer`` as one-step episodes, then
    ``PPO._preprocess_batch`` (its defaults: GAE, then log pi_old of the stored actions) and the first
    ``_update_with_batch`` minibatch's ratios, ``exp(dist.log_prob(act) - logp_old)`` (ppo.py:187), recorded before
    its optimizer step (which is not taken)."""
    B = loc.shape[0]
    policy = _described_policy(family, loc, scale)
    algorithm = PPO(policy=policy, critic=_ZeroCritic(loc.dtype), optim=AdamOptimizerFactory())
    rows = np.arange(B)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(int(seed))
        act = to_numpy(policy(Batch(obs=rows, info=Batch())).act)
    ends = np.ones(B, dtype=bool)
    buffer = ReplayBuffer.from_data(obs=rows, act=act, rew=np.zeros(B), terminated=ends, truncated=~ends, done=ends,
                                    obs_next=rows)
    batch, indices = buffer.sample(0)
    first = _FirstLogProb()
    with torch.no_grad():
        batch = algorithm._preprocess_batch(batch, buffer, indices)
    logp_old = torch.empty_like(batch.logp_old)
    logp_old[torch.as_tensor(batch.obs, dtype=torch.long)] = batch.logp_old  # by state
    dist_fn = policy.dist_fn
    policy.dist_fn = lambda parameters: first.wrap(dist_fn(parameters), policy.actor.rows)  # _update_with_batch shuffles
    _record_steps(algorithm.optim)
    shuffle = np.random.get_state()  # Batch.split shuffles with numpy's global generator: put it back
    try:
        with torch.enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the unbiased std of a one-state batch's advantages (ppo.py:185), unused here
            algorithm._update_with_batch(batch, batch_size=None, repeat=1)
    finally:
        np.random.set_state(shuffle)
    ratios = torch.empty(B, dtype=first.logp.dtype)
    ratios[first.index] = (first.logp - logp_old[first.index]).exp().float().to(first.logp.dtype)  # ppo.py:187
    return ratios


# ---------------------------------------------------------------------------------------------
# off-policy continuous control: DDPG, TD3, SAC (algorithm/modelfree/ddpg.py, td3.py, sac.py)


def _as_input(x, net: torch.nn.Module) -> torch.Tensor:
    """Observations or actions as a tensor of the network's dtype (Tianshou's own nets cast to float32)."""
    parameter = next(net.parameters())
    return torch.as_tensor(x, dtype=parameter.dtype, device=parameter.device)


class _Units:
    """The affine map between the protocol's actions in [low, high] and Tianshou's, in [-max_action, max_action] =
    [-1, 1] per dimension (``action_scaling``: ``map_action`` maps them onto the box on the way to the environment,
    and only there; the buffer, the critics and TD3's target smoothing work in Tianshou's units). The identity when
    no box is given."""

    def __init__(self, low=None, high=None):
        self.centre = None if low is None else (high + low) / 2
        self.half_width = None if low is None else (high - low) / 2

    def to_tianshou(self, a):
        return a if self.centre is None else (a - self.centre.to(a.dtype)) / self.half_width.to(a.dtype)

    def to_protocol(self, a):
        return a if self.centre is None else self.centre.to(a.dtype) + self.half_width.to(a.dtype) * a


class _DeterministicActor(torch.nn.Module):
    """The suite's ``actor(obs) -> (B, D)`` as Tianshou's deterministic actor: ``forward(obs, state, info) ->
    (actions, state)``, as ``ContinuousActorDeterministic`` (max_action 1), its actions in Tianshou's units."""

    max_action = 1.0

    def __init__(self, net, units=None):
        super().__init__()
        self.net, self.units = net, units or _Units()

    def forward(self, obs, state=None, info=None):
        return self.units.to_tianshou(self.net(_as_input(obs, self.net))), state


class _Critic(torch.nn.Module):
    """The suite's ``critic(obs, action) -> (B,)`` as Tianshou's ``ContinuousCritic``: ``(B, 1)`` values of actions
    in Tianshou's units."""

    def __init__(self, net, units=None):
        super().__init__()
        self.net, self.units = net, units or _Units()

    def forward(self, obs, act=None, info=None):
        act = self.units.to_protocol(_as_input(act, self.net))
        return self.net(_as_input(obs, self.net), act).unsqueeze(-1)


class _GaussianActor(torch.nn.Module):
    """The suite's ``policy(obs) -> (mean, log_std)`` as Tianshou's probabilistic actor: ``((loc, scale), state)``,
    what ``ContinuousActorProbabilistic`` returns (scale = exp(log_std))."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, obs, state=None, info=None):
        mean, log_std = self.net(_as_input(obs, self.net))
        return (mean, log_std.exp()), state


def _box(dim: int) -> gym.spaces.Box:
    """The actor's action space: Tianshou's actors act in [-1, 1]^D (``map_action`` scales to the
    environment's bounds on the way out, and only there)."""
    return gym.spaces.Box(-1.0, 1.0, (int(dim),))


def _load_lagged(lagged, module) -> None:
    """A lagged (target) network of Tianshou's (an ``EvalModeModuleWrapper`` around a deep copy of the
    online wrapper) takes the suite's target network's parameters."""
    with torch.no_grad():
        lagged.module.net.load_state_dict(module.state_dict())


def _numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _replay(obs, actions, rewards, next_obs, terminated, truncated) -> tuple[ReplayBuffer, Batch, np.ndarray]:
    """A real ``ReplayBuffer`` holding the rows as transitions (``done = terminated | truncated``, as
    ``add`` stores it); returns it, ``buffer[indices]`` and the indices."""
    terminated, truncated = _numpy(terminated).astype(bool), _numpy(truncated).astype(bool)
    buffer = ReplayBuffer.from_data(obs=_numpy(obs), act=_numpy(actions), rew=_numpy(rewards), terminated=terminated,
                                    truncated=truncated, done=terminated | truncated, obs_next=_numpy(next_obs))
    indices = np.arange(len(terminated))
    return buffer, buffer[indices], indices


def _critic_targets(algorithm, obs, actions, rewards, next_obs, terminated, truncated) -> torch.Tensor:
    """``algorithm._preprocess_batch``: ``compute_nstep_return`` with the algorithm's ``_target_q`` (n_step 1,
    its default), inside a training step as ``Algorithm._update`` runs it (SAC samples its next action there)."""
    buffer, batch, indices = _replay(obs, actions, rewards, next_obs, terminated, truncated)
    with policy_within_training_step(algorithm.policy):
        batch = algorithm._preprocess_batch(batch, buffer, indices)
    return batch.returns.flatten()


@contextlib.contextmanager
def _td3_smoothing_noise(noise):
    """TD3 draws its smoothing noise with ``torch.randn(size=act.shape) * policy_noise`` inside td3.py: for the
    call, that module's ``torch.randn`` returns the suite's draw (the rest of its ``torch`` is torch's)."""

    class _Torch:
        def __getattr__(self, name):
            return getattr(torch, name)

        @staticmethod
        def randn(*size, **kwargs):
            shape = tuple(kwargs.get("size", size[0] if len(size) == 1 and not isinstance(size[0], int) else size))
            if shape != tuple(noise.shape):
                raise ValueError(f"TD3 drew smoothing noise of shape {shape}; the suite's noise is {tuple(noise.shape)}")
            return noise.clone()

    original = td3_module.torch
    td3_module.torch = _Torch()
    try:
        yield
    finally:
        td3_module.torch = original


@contextlib.contextmanager
def _standard_normal_draws(noise):
    """``Normal.rsample`` (what ``SACPolicy.forward`` draws with) is ``loc + eps * scale`` with ``eps`` from
    ``torch.distributions.normal._standard_normal``: for the call, ``eps`` is the suite's noise."""
    original = normal_module._standard_normal

    def given(shape, dtype, device):
        if tuple(shape) != tuple(noise.shape):
            raise ValueError(f"SAC drew a sample of shape {tuple(shape)}; the suite's noise is {tuple(noise.shape)}")
        return noise.to(dtype=dtype, device=device).clone()

    normal_module._standard_normal = given
    try:
        yield
    finally:
        normal_module._standard_normal = original


def _record_steps(*optimizers) -> list:
    """Replaces each ``Algorithm.Optimizer.step(loss)`` by a recorder: the losses Tianshou hands its optimizers
    come back unstepped, in order, as (optimizer index, loss)."""
    stepped = []
    for i, optimizer in enumerate(optimizers):
        optimizer.step = lambda loss, *args, i=i, **kwargs: stepped.append((i, loss))
    return stepped


def td_target(rewards, next_q, terminated, truncated, gamma):
    """``Algorithm.compute_nstep_return`` (n_step 1) on a real buffer of the rows, its ``target_q_fn``
    answering Q'(s', a') = ``next_q``: Tianshou masks it with ``value_mask = ~terminated`` and adds the
    reward (``_nstep_return``, a numba kernel, float64)."""
    buffer, batch, indices = _replay(np.arange(len(rewards), dtype=float)[:, None], np.zeros((len(rewards), 1)), rewards,
                                     np.arange(len(rewards), dtype=float)[:, None] + 1, terminated, truncated)
    q = torch.as_tensor(next_q)
    batch = Algorithm.compute_nstep_return(batch, buffer, indices, lambda buffer, rows: q[rows].unsqueeze(-1),
                                           gamma=float(gamma), n_step=1)
    return batch.returns.flatten().numpy()


def _ddpg(actor, critic, gamma=0.99) -> DDPG:
    D = actor.bias.shape[0] if hasattr(actor, "bias") else 1
    policy = ContinuousDeterministicPolicy(actor=_DeterministicActor(actor), action_space=_box(D))
    return DDPG(policy=policy, policy_optim=AdamOptimizerFactory(), critic=_Critic(critic), critic_optim=AdamOptimizerFactory(),
                gamma=float(gamma))


def ddpg_critic_target(actor, critic, target_actor, target_critic, obs, actions, rewards, next_obs, terminated, truncated, gamma):
    """DDPG's ``_preprocess_batch`` with the suite's target actor and critic loaded into its lagged networks
    (``actor_old``, ``critic_old``): ``critic_old(s', actor_old(s'))`` masked by ``~terminated``."""
    algorithm = _ddpg(actor, critic, gamma)
    _load_lagged(algorithm.actor_old, target_actor)
    _load_lagged(algorithm.critic_old, target_critic)
    return _critic_targets(algorithm, obs, actions, rewards, next_obs, terminated, truncated)


def _td3(actor, critic1, critic2, units=None, **options) -> TD3:
    """TD3 on the suite's networks (``critic2=None``: Tianshou's deep copy of the first critic), in Tianshou's action
    units (``units``: the box the protocol's actions live in; default [-1, 1]^D)."""
    D = actor.bias.shape[0]
    box = _box(D) if units is None or units.centre is None else gym.spaces.Box(
        _numpy(units.centre - units.half_width), _numpy(units.centre + units.half_width), (D,))
    policy = ContinuousDeterministicPolicy(actor=_DeterministicActor(actor, units), action_space=box)
    return TD3(policy=policy, policy_optim=AdamOptimizerFactory(), critic=_Critic(critic1, units), critic_optim=AdamOptimizerFactory(),
               critic2=None if critic2 is None else _Critic(critic2, units), **options)


class _PerDimension(torch.Tensor):
    """TD3's ``noise_clip`` per action dimension: the protocol's clip c, in the box's units, is c / half_width_d in
    Tianshou's (one number when the half-widths are equal, as for a user's symmetric box). TD3 compares it with 0
    (``if self.noise_clip > 0.0``: 0 disables the clip) and clamps the noise with it; the comparison is its sign."""

    def __gt__(self, other):
        return bool(torch.all(self.as_subclass(torch.Tensor) > other))


def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    """TD3's ``_preprocess_batch`` (``_target_q_compute_action``: the lagged actor's action plus
    ``randn * policy_noise``, clamped to +-noise_clip only when noise_clip > 0; then the minimum of the two lagged
    critics) in Tianshou's action units: the box [low, high] is Tianshou's [-1, 1]^D (``action_scaling``), the
    actors' actions and the critics' inputs go through that affine map, the suite's smoothing noise arrives as
    ``randn`` (``policy_noise = 1``) divided by the half-widths, and the clip as ``noise_clip`` / half-width. TD3 then
    never clamps the noisy target action to [-max_action, max_action], which is [low, high] (bugs-found)."""
    units = _Units(torch.as_tensor(low, dtype=noise.dtype), torch.as_tensor(high, dtype=noise.dtype))
    clip = (float(noise_clip) / units.half_width).as_subclass(_PerDimension)
    algorithm = _td3(actor, critic1, critic2, units, gamma=float(gamma), policy_noise=1.0, noise_clip=clip)
    _load_lagged(algorithm.actor_old, target_actor)
    _load_lagged(algorithm.critic_old, target_critic1)
    _load_lagged(algorithm.critic2_old, target_critic2)
    stored = units.to_tianshou(torch.as_tensor(actions, dtype=noise.dtype))  # the buffer holds Tianshou's units
    with _td3_smoothing_noise(noise / units.half_width):
        return _critic_targets(algorithm, obs, stored, rewards, next_obs, terminated, truncated)


def _sac(policy, critic1, critic2, alpha, gamma=0.99) -> SAC:
    D = policy.bm.shape[0] if hasattr(policy, "bm") else 1
    sac_policy = SACPolicy(actor=_GaussianActor(policy), action_space=_box(D))
    alpha = alpha if isinstance(alpha, Alpha) else float(alpha)
    return SAC(policy=sac_policy, policy_optim=AdamOptimizerFactory(), critic=_Critic(critic1), critic_optim=AdamOptimizerFactory(),
               critic2=_Critic(critic2), gamma=float(gamma), alpha=alpha)


def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs, terminated,
                      truncated, gamma, alpha, noise):
    """SAC's ``_preprocess_batch``: ``SACPolicy.forward`` at s' (``rsample`` with the suite's standard normal
    draw, tanh, ``correct_log_prob_gaussian_tanh``), then ``min(critic_old, critic2_old) - alpha log_prob``,
    masked by ``~terminated``; the suite's target critics loaded into the lagged ones."""
    algorithm = _sac(policy, critic1, critic2, alpha, gamma)
    _load_lagged(algorithm.critic_old, target_critic1)
    _load_lagged(algorithm.critic2_old, target_critic2)
    with _standard_normal_draws(noise):
        return _critic_targets(algorithm, obs, actions, rewards, next_obs, terminated, truncated)


def _update_batch(obs, D: int) -> Batch:
    """A replay batch for an ``_update_with_batch`` whose critic losses are recorded and discarded: the suite's
    observations, zero actions and zero returns."""
    obs = torch.as_tensor(obs)
    n = obs.shape[0]
    return Batch(obs=obs, act=torch.zeros(n, D, dtype=obs.dtype), returns=torch.zeros(n, 1, dtype=obs.dtype), info=Batch())


def dpg_actor_loss(actor, critic, obs):
    """One ``DDPG._update_with_batch`` with its optimizers' steps recorded: the actor loss it hands
    ``policy_optim``, ``-critic(obs, policy(obs).act).mean()``, returned unstepped. The critic enters with its
    live parameters (Tianshou zeroes the critic's gradients before the critic's own step: declared
    ``actor_loss_critic_gradient = "discarded"``)."""
    algorithm = _ddpg(actor, critic)
    stepped = _record_steps(algorithm.critic_optim, algorithm.policy_optim)
    with torch.enable_grad(), policy_within_training_step(algorithm.policy):
        algorithm._update_with_batch(_update_batch(obs, actor.bias.shape[0]))
    return next(loss for i, loss in stepped if i == 1)


def sac_actor_loss(policy, critic1, critic2, obs, alpha, noise):
    """One ``SAC._update_with_batch`` (``FixedAlpha(alpha)``) with its optimizers' steps recorded: the actor loss
    ``(alpha log_prob - min(critic(obs, act), critic2(obs, act))).mean()`` through ``SACPolicy.forward``'s
    ``rsample`` (the suite's noise), returned unstepped; the critics enter with their live parameters."""
    algorithm = _sac(policy, critic1, critic2, alpha)
    stepped = _record_steps(algorithm.critic_optim, algorithm.critic2_optim, algorithm.policy_optim)
    with torch.enable_grad(), policy_within_training_step(algorithm.policy), _standard_normal_draws(noise):
        algorithm._update_with_batch(_update_batch(obs, policy.bm.shape[0]))
    return next(loss for i, loss in stepped if i == 2)


class _GivenSample(SACPolicy):
    """A SAC policy whose sample is given: ``act`` zeros and ``log_prob`` the suite's (B, 1) log-densities (the
    stage the protocol passes as an input to the temperature loss)."""

    def __init__(self, log_prob, action_dim):
        super().__init__(actor=_ConstantCritic(log_prob.dtype), action_space=_box(action_dim))
        self.given = log_prob

    def forward(self, batch, state=None, **kwargs):
        n = self.given.shape[0]
        return Batch(act=torch.zeros(n, self.action_space.shape[0], dtype=self.given.dtype), log_prob=self.given.reshape(n, 1),
                     state=None)


class _ZeroCritic(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1, dtype=dtype))

    def forward(self, obs, act=None, info=None):
        return self.w.expand(len(obs), 1)


class _BackwardRecorded(torch.Tensor):
    """A tensor whose ``backward()`` is recorded instead of run, so the graph of a loss Tianshou steps on
    itself (``AutoAlpha.update`` calls ``alpha_loss.backward()``) survives for the suite to differentiate.
    Results of torch operations on it are of this class too (torch's default ``__torch_function__``)."""

    def backward(self, *args, **kwargs):
        _BACKWARD_RECORDED.append(self)


_BACKWARD_RECORDED: list = []


class _ContinuousEnvironments:
    """What ``AutoAlphaFactoryDefault.create_auto_alpha`` reads of ``tianshou.highlevel.env.Environments``."""

    def __init__(self, action_dim):
        self.action_dim = action_dim

    def get_action_shape(self):
        return (self.action_dim,)

    def get_type(self):
        from tianshou.highlevel.env import EnvType

        return EnvType.CONTINUOUS


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    """One ``SAC._update_with_batch`` with ``AutoAlpha``: SAC hands ``alpha.update`` the entropy
    ``-log_prob.detach()`` of its policy's sample and ``AutoAlpha.update`` steps on
    ``-(log_alpha * (target_entropy - entropy)).mean()``. The policy's sample is given (``_GivenSample``: the
    suite's log_prob); ``AutoAlpha``'s log_alpha parameter is the suite's, and its ``backward()`` is recorded
    (``_BackwardRecorded``) so that the loss comes back with its graph. ``target_entropy=None``: the alpha of
    the high-level API's ``AutoAlphaFactoryDefault`` (target entropy ``-1 * dim(A)``; ``AutoAlpha`` itself has
    no default)."""
    dtype = log_prob.dtype
    if target_entropy is None:
        from tianshou.highlevel.params.alpha import AutoAlphaFactoryDefault

        alpha = AutoAlphaFactoryDefault().create_auto_alpha(_ContinuousEnvironments(int(action_dim)), "cpu")
    else:
        alpha = AutoAlpha(float(target_entropy), float(log_alpha), AdamOptimizerFactory(lr=3e-4))
    alpha._parameters["_log_alpha"] = log_alpha.as_subclass(_BackwardRecorded)
    algorithm = SAC(policy=_GivenSample(log_prob, int(action_dim)), policy_optim=AdamOptimizerFactory(), critic=_ZeroCritic(dtype),
                    critic_optim=AdamOptimizerFactory(), critic2=_ZeroCritic(dtype), alpha=alpha)
    _record_steps(algorithm.critic_optim, algorithm.critic2_optim, algorithm.policy_optim)
    _BACKWARD_RECORDED.clear()
    with torch.enable_grad(), policy_within_training_step(algorithm.policy):
        algorithm._update_with_batch(_update_batch(torch.zeros(len(log_prob), 1, dtype=dtype), int(action_dim)))
    (loss,) = _BACKWARD_RECORDED
    _BACKWARD_RECORDED.clear()
    return loss.as_subclass(torch.Tensor)


class _Parameters1D(torch.nn.Module):
    """A network whose parameters are one flat vector: the target-update operations' ``(P,)`` parameters. As an
    actor or a critic of a TD3 it outputs zeros (the losses it enters are recorded, not stepped)."""

    max_action = 1.0

    def __init__(self, theta, critic: bool):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.as_tensor(theta, dtype=torch.float32).detach().clone())
        self.critic = critic

    def forward(self, obs, act=None, info=None, state=None):
        zeros = torch.zeros(len(obs), 1, dtype=self.theta.dtype)
        return zeros if self.critic else (zeros, state)


def polyak_update(target, online, tau):
    """``LaggedNetworkCollection.polyak_parameter_update(tau)`` (what ``_update_lagged_network_weights`` of DDPG,
    TD3, SAC and CQL runs): ``tau * source + (1 - tau) * target`` on a lagged copy holding ``target``, the
    parameters float32 as a Tianshou network's are (its nets compute in torch's default float32)."""
    lagged = LaggedNetworkCollection()
    source = _Parameters1D(online, critic=True)
    copy = lagged.add_lagged_network(source)
    with torch.no_grad():
        copy.module.theta.copy_(torch.as_tensor(target, dtype=torch.float32))
    lagged.polyak_parameter_update(float(tau))
    return copy.module.theta.detach().numpy().copy()


def _td3_schedule(target, online, tau, period):
    """N ``TD3._update_with_batch`` calls (``update_actor_freq = period``, ``tau``) on one algorithm, as its
    trainer makes them (one per gradient step, whatever the calls' grouping): the critic's "step" n sets it to
    ``online[n - 1]``; returns the lagged critic after each update, and whether the actor stepped and the lagged
    networks were updated."""
    online = np.asarray(online)
    N, P = online.shape
    critic = _Parameters1D(online[0], critic=True)
    algorithm = TD3(policy=ContinuousDeterministicPolicy(actor=_Parameters1D(online[0], critic=False), action_space=_box(1)),
                    policy_optim=AdamOptimizerFactory(), critic=critic, critic_optim=AdamOptimizerFactory(),
                    critic2=_Parameters1D(online[0], critic=True), tau=float(tau), update_actor_freq=int(period))
    with torch.no_grad():
        algorithm.critic_old.module.theta.copy_(torch.as_tensor(target, dtype=torch.float32))
    step = [0]
    actor_steps, target_updates = np.zeros(N), np.zeros(N)

    def critic_step(loss, *args, **kwargs):
        with torch.no_grad():
            critic.theta.copy_(torch.as_tensor(online[step[0]], dtype=torch.float32))

    algorithm.critic_optim.step = critic_step
    algorithm.critic2_optim.step = lambda loss, *args, **kwargs: None
    algorithm.policy_optim.step = lambda loss, *args, **kwargs: actor_steps.__setitem__(step[0], 1.0)
    update = algorithm._update_lagged_network_weights

    def recorded_update():
        target_updates[step[0]] = 1.0
        update()

    algorithm._update_lagged_network_weights = recorded_update
    targets = np.empty((N, P), dtype=np.float32)
    batch = _update_batch(torch.zeros(1, 1), 1)
    with policy_within_training_step(algorithm.policy):
        for n in range(N):
            step[0] = n
            algorithm._update_with_batch(batch)
            targets[n] = algorithm.critic_old.module.theta.detach().numpy()
    return targets, actor_steps, target_updates


def target_network_updates(target, online, tau, period, gradient_steps):
    """TD3's target networks (the lagged critic): ``_update_lagged_network_weights`` (the Polyak update above)
    runs with the actor, when ``_cnt % update_actor_freq == 0`` before ``_cnt`` advances (steps 1, period + 1,
    ...: declared update_phase ``start``); ``period = 1`` is DDPG's and SAC's every-step update, ``tau = 1`` a
    copy. Tianshou counts gradient steps on the algorithm (``_cnt``), so the calls' grouping does not enter."""
    return _td3_schedule(target, online, tau, period)[0]


def td3_actor_update_steps(gradient_steps, policy_delay):
    """``TD3._update_with_batch`` ``sum(gradient_steps)`` times with ``update_actor_freq = policy_delay``: 1.0
    where it stepped the actor's optimizer, and where it updated its lagged networks."""
    N = int(sum(gradient_steps))
    _, actor_steps, target_updates = _td3_schedule(np.zeros(1), np.zeros((N, 1)), 0.005, policy_delay)
    return actor_steps, target_updates


# ---------------------------------------------------------------------------------------------
# offline: DiscreteCQL, CQL, DiscreteCRR (algorithm/imitation/discrete_cql.py, cql.py, discrete_crr.py)


class _QuantileLookup(torch.nn.Module):
    """QR-DQN's model: obs (the state's row) -> ``(B, A, num_quantiles)`` quantiles, every one of an action
    equal to the suite's Q(s, a), so that ``QRDQNPolicy.compute_q_value`` (their mean) is Q."""

    def __init__(self, num_quantiles):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))
        self.num_quantiles, self.q = num_quantiles, None

    def forward(self, obs, state=None, info=None):
        q = self.q[torch.as_tensor(obs, dtype=torch.long).reshape(-1)]
        return q.unsqueeze(-1).expand(*q.shape, self.num_quantiles), state


def cql_penalty(q_values, actions, alpha):
    """``DiscreteCQL._update_with_batch`` (``min_q_weight = alpha``) on one state at a time, its optimizer's
    step recorded: ``qr_loss + min_q_weight * (logsumexp(q).mean() - q[a].mean())`` with the quantile
    regression target equal to the data action's quantiles (``returns``), so ``qr_loss`` is exactly 0 with a
    zero gradient; the batch mean over one state is that state's penalty. Then one call on the whole batch, whose
    loss must be the mean of the per-state ones (``_agrees_with_batch``)."""
    B, A = q_values.shape
    model = _QuantileLookup(num_quantiles=200)  # DiscreteCQL's default
    # QRDQN.__init__ adds a filter for torch's broadcasting warning of its (intended) pairwise quantile loss; here
    # only for the call
    with warnings.catch_warnings():
        algorithm = DiscreteCQL(policy=QRDQNPolicy(model=model, action_space=gym.spaces.Discrete(int(A))),
                                optim=AdamOptimizerFactory(), min_q_weight=float(alpha))
        model.q = q_values
        stepped = _record_steps(algorithm.optim)
        actions = torch.as_tensor(actions).long()
        for b in range(B):
            a = int(actions[b])
            returns = q_values[b, a].detach().reshape(1, 1).expand(1, model.num_quantiles)
            algorithm._update_with_batch(Batch(obs=np.array([b]), act=np.array([a]), returns=returns, info=Batch()))
        per_state = torch.stack([loss for _, loss in stepped]).reshape(B)
        returns = q_values.detach().gather(1, actions[:, None]).expand(B, model.num_quantiles)
        algorithm._update_with_batch(Batch(obs=np.arange(B), act=actions.numpy(), returns=returns, info=Batch()))
    return _agrees_with_batch(per_state, stepped[-1][1], "DiscreteCQL penalty")


_DATA_ACTION, _POLICY_CODE = 5.0, 10.0  # action values the CQL lookups read: the data action, policy slots from 10


class _SampledQ(torch.nn.Module):
    """CQL's critic for one state: ``critic(obs, act) -> (n, 1)`` answering, in float32 (CQL casts its batch to
    float), Q at the data action (action ``_DATA_ACTION``: the suite's ``q_data``), at a policy slot (action
    ``_POLICY_CODE + k``: slot k of ``policy``) or, for CQL's uniform draws (any other action), at its k-th
    draw (``uniform``). Its lagged copies hold no values and answer 0 (the target that ``done`` masks)."""

    def __init__(self):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))
        self.data = self.policy = self.uniform = None

    def forward(self, obs, act=None, info=None):
        act = torch.as_tensor(act)
        n = act.shape[0]
        if self.data is None:
            return torch.zeros(n, 1)
        code = act[:, 0]
        if bool(torch.all(code == _DATA_ACTION)) and n == 1:
            values = self.data.reshape(1)
        elif bool(torch.all(code >= _POLICY_CODE)):
            values = self.policy[(code - _POLICY_CODE).long()]
        else:
            values = self.uniform[:n]
        return values.float().reshape(n, 1)


class _SampledPolicy(SACPolicy):
    """CQL's policy for one state: at s (observation [0, 0]) the k-th row's action is policy slot k ("current"
    samples), at s' ([0, 1]) slot R + k ("next" samples), each with its slot's log-density."""

    def __init__(self, dim, repeats):
        super().__init__(actor=_ConstantCritic(torch.float32), action_space=_box(dim))
        self.repeats, self.log_pi = repeats, None

    def forward(self, batch, state=None, **kwargs):
        obs = torch.as_tensor(batch.obs)
        n = obs.shape[0]
        slots = torch.arange(n) + self.repeats * obs[:, 1].long()
        act = (_POLICY_CODE + slots.to(torch.float32))[:, None].expand(n, self.action_space.shape[0])
        return Batch(act=act, log_prob=self.log_pi[slots].float().reshape(n, 1), state=None)


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    """``CQL._update_with_batch`` on one state at a time (``num_repeat_actions = R``), its optimizers' steps
    recorded; the penalty is the first critic's loss, whose TD term is exactly 0 (the target is the data's own Q:
    ``rew = q_data``, ``done``). CQL draws R uniform actions, R policy actions at s and R at s' (all scored at s):
    N uniform and M policy samples fill R = max(N, ceil(M / 2)) of each, the policy's at s first; a slot they do
    not fill holds Q = -inf (weight exp(-inf) = 0: under CQL's declared sum normalisation it drops out of a
    logsumexp). ``cql_weight = alpha`` with ``with_lagrange=False`` (the protocol's weight is fixed; the default
    Lagrangian learns it and subtracts ``lagrange_threshold``); ``calibrated=True`` (the default) with
    calibration returns -inf, so Cal-QL's lower bound never binds; ``temperature = T``. The box enters nowhere:
    CQL's uniform log-density is ``log(0.5 ** D)`` whatever ``min_action`` and ``max_action`` say."""
    B, N = q_uniform.shape
    M = q_policy.shape[1]
    D = len(action_low)
    R = max(N, -(-M // 2))
    critic, policy = _SampledQ(), _SampledPolicy(D, R)
    algorithm = CQL(policy=policy, policy_optim=AdamOptimizerFactory(), critic=critic, critic_optim=AdamOptimizerFactory(),
                    critic2=critic, cql_weight=float(alpha), temperature=float(temperature), with_lagrange=False,
                    num_repeat_actions=R)
    stepped = _record_steps(algorithm.critic_optim, algorithm.critic2_optim, algorithm.policy_optim)
    losses = []
    with torch.random.fork_rng(devices=[]), torch.enable_grad(), policy_within_training_step(policy):
        for b in range(B):
            slots = torch.full((2 * R,), -math.inf, dtype=q_policy.dtype)
            slots = torch.cat([q_policy[b], slots[M:]])
            critic.data, critic.policy = q_data[b], slots
            critic.uniform = torch.cat([q_uniform[b], torch.full((R - N,), -math.inf, dtype=q_uniform.dtype)])
            policy.log_pi = torch.cat([log_pi[b], torch.zeros(2 * R - M, dtype=log_pi.dtype)])
            batch = Batch(obs=np.array([[0.0, 0.0]]), obs_next=np.array([[0.0, 1.0]]), act=np.full((1, D), _DATA_ACTION),
                          rew=np.array([float(q_data[b])]), done=np.array([True]), calibration_returns=np.array([-np.inf]),
                          info=Batch())
            stepped.clear()
            algorithm._update_with_batch(batch)
            losses.append(next(loss for i, loss in stepped if i == 0))
    return torch.stack(losses).reshape(B)


class _GivenCategorical(Distribution):
    """The policy's distribution inside DiscreteCRR for one state (``Categorical(logits=...)`` there, whatever the
    policy's ``dist_fn``): ``log_prob(a)`` reads the actor's output as log-probabilities (the suite's log pi(a|s),
    the stage the protocol passes as an input); ``probs`` puts the expectation ``E_pi[Q(s, .)]`` of CRR's
    advantage on the action ``mass`` (set by :func:`_crr_distribution`)."""

    arg_constraints: dict = {}
    mass = 0

    def __init__(self, logits):
        self.given = logits
        super().__init__(batch_shape=logits.shape[:1], validate_args=False)

    def log_prob(self, value):
        return self.given.gather(-1, value.long().reshape(-1, 1)).reshape(-1)

    @property
    def probs(self):
        mass = torch.as_tensor(self.mass).reshape(-1)  # one action, or one per state
        one_hot = torch.nn.functional.one_hot(mass, self.given.shape[-1]).to(self.given.dtype)
        return one_hot.expand(self.given.shape)


class _RowTensors(torch.nn.Module):
    """An actor or critic whose output for state b (its observation is its row, b) is row b of a given (B, A) tensor
    (the actor's with ``state``)."""

    def __init__(self, actor: bool):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))
        self.actor, self.value = actor, None

    def forward(self, obs, state=None, info=None):
        out = self.value[torch.as_tensor(obs, dtype=torch.long).reshape(-1)]
        return (out, state) if self.actor else out


@contextlib.contextmanager
def _crr_distribution():
    """DiscreteCRR builds ``Categorical(logits=actor(obs))`` itself: for the call, that name in discrete_crr.py is
    a subclass of ``_GivenCategorical``, whose ``mass`` the caller sets through the class yielded."""
    given = type("_GivenCategoricalOfCall", (_GivenCategorical,), {})
    original = crr_module.Categorical
    crr_module.Categorical = given
    try:
        yield given
    finally:
        crr_module.Categorical = original


def _crr(beta=1.0, min_q_weight=0.0, actions=2):
    actor, critic = _RowTensors(actor=True), _RowTensors(actor=False)
    policy = DiscreteActorPolicy(actor=actor, action_space=gym.spaces.Discrete(int(actions)))
    algorithm = DiscreteCRR(policy=policy, critic=critic, optim=AdamOptimizerFactory(), beta=float(beta),
                            min_q_weight=float(min_q_weight))
    return algorithm, actor, critic, _record_steps(algorithm.optim)


def _crr_batch(algorithm, actions, rewards) -> None:
    """One ``_update_with_batch`` on the states ``0 .. B - 1`` (observation = the state's row) with data actions
    ``actions``; each state's TD target is its ``rewards`` entry (``done``), the data action's own Q, so the critic's
    loss is exactly 0."""
    B = len(actions)
    rows = np.arange(B, dtype=float)[:, None]
    batch = Batch(obs=rows, act=np.asarray(actions), rew=np.asarray(rewards, dtype=float), obs_next=rows,
                  done=np.ones(B, dtype=bool), info=Batch())
    algorithm._update_with_batch(batch)


def awr_loss(log_prob, advantages, beta):
    """``DiscreteCRR._update_with_batch`` (``policy_improvement_mode="exp"``, ``ratio_upper_bound`` 20, ``beta``) on
    the whole batch, as a user's batch reaches it, its optimizer's step recorded: ``actor_loss = (-dist.log_prob(act)
    * (advantage / beta).exp().clamp(0, 20)).mean()`` with ``advantage = Q(s, a) - E_pi[Q(s, .)]``. Each state has
    two actions, the data's is 0: the critic answers ``Q(s_b, .) = [A_b, 0]`` and the distribution
    (``_GivenCategorical``) gives log pi(0|s_b) the suite's log_prob and puts E_pi on action 1, so the advantage is
    exactly A_b, computed by CRR from its critic. The critic's own loss is 0 and ``min_q_weight = 0`` leaves out
    CRR's CQL regulariser (variant ``crr_regulariser``): the recorded loss is the actor's batch mean L. The loss per
    sample is read back from it as ``B dL/ds_b`` with the log-probabilities entering as ``s_b log pi_b``, s = 1 (kept
    differentiable): for a batch mean of per-sample terms ``-s_b log pi_b w_b`` that is ``-log pi_b w_b``
    exactly."""
    B = len(log_prob)
    algorithm, actor, critic, stepped = _crr(beta=beta)
    zeros = torch.zeros(B, dtype=log_prob.dtype)
    with torch.enable_grad(), _crr_distribution() as distribution:
        distribution.mass = 1
        s = torch.ones(B, dtype=log_prob.dtype, requires_grad=True)
        actor.value = torch.stack([s * log_prob, zeros], -1)  # (B, 2)
        critic.value = torch.stack([advantages, zeros], -1)
        _crr_batch(algorithm, np.zeros(B, dtype=np.int64), advantages.detach().numpy())
        ((_, loss),) = stepped
        (per_sample,) = torch.autograd.grad(loss, s, create_graph=True)
    return B * per_sample


def _agrees_with_batch(per_state, batch_mean, what: str):
    """The per-state losses (one call per state: the protocol asks for each state's value, the library returns a batch
    mean) against one call on the whole batch, as a user's batch reaches the library: their mean must be its loss, or
    the library's rows interact and the per-state answers would hide it. Bound: the batch mean of B float32 terms is
    within B u sum |f_b| / B of their exact mean, each term as computed alone; doubled for the per-state sum."""
    expected = per_state.detach().double().mean()
    u = float(torch.finfo(torch.float32).eps) / 2
    tol = 2 * len(per_state) * u * float(per_state.detach().double().abs().mean()) + 1e-30
    if abs(float(batch_mean) - float(expected)) > tol:
        raise ValueError(f"Tianshou's {what} on the whole batch is {float(batch_mean)!r}, not the mean of its per-state values "
                         f"{float(expected)!r}: its rows interact")
    return per_state


def _crr_cql_penalty(q_values, actions, alpha):
    """DiscreteCRR's CQL regulariser, ``min_q_weight * (q_t.logsumexp(1) - q_t[a]).mean()``, through one
    ``_update_with_batch`` per state (``min_q_weight = alpha``): the critic answers the suite's Q(s, .), the
    policy puts all its mass on the data action (log pi(a) = 0, so the advantage is 0 and the actor's loss
    -0 * 1 adds nothing, nor any gradient) and the critic's TD target is Q(s, a) itself. Then one call on the whole
    batch, whose loss must be the mean of the per-state ones (``_agrees_with_batch``)."""
    B, A = q_values.shape
    algorithm, actor, critic, stepped = _crr(min_q_weight=alpha, actions=A)
    actions = torch.as_tensor(actions).long()
    with torch.enable_grad(), _crr_distribution() as distribution:
        actor.value = torch.zeros(1, A, dtype=q_values.dtype)
        for b in range(B):
            a = int(actions[b])
            distribution.mass = a
            critic.value = q_values[b][None]
            _crr_batch(algorithm, [a], [float(q_values[b, a])])
        per_state = torch.stack([loss for _, loss in stepped]).reshape(B)
        distribution.mass, actor.value, critic.value = actions, torch.zeros(B, A, dtype=q_values.dtype), q_values
        _crr_batch(algorithm, actions.numpy(), q_values.detach().gather(1, actions[:, None])[:, 0].numpy())
    return _agrees_with_batch(per_state, stepped[-1][1], "DiscreteCRR regulariser")


def _td3_dpg_actor_loss(actor, critic, obs):
    """TD3's actor step: one ``TD3._update_with_batch`` (its first, ``_cnt = 0``, updates the actor) with its
    optimizers' steps recorded: ``-critic(obs, policy(batch, eps=0.0).act).mean()``, returned unstepped."""
    algorithm = _td3(actor, critic, None)
    stepped = _record_steps(algorithm.critic_optim, algorithm.critic2_optim, algorithm.policy_optim)
    with torch.enable_grad(), policy_within_training_step(algorithm.policy):
        algorithm._update_with_batch(_update_batch(obs, actor.bias.shape[0]))
    return next(loss for i, loss in stepped if i == 2)


# ---------------------------------------------------------------------------------------------
# variants: --candidate tianshou:NAME

dual_clip = SimpleNamespace(
    __doc__="PPO(dual_clip=3.0): for A < 0 the objective is floored at 3 A.",
    ppo_clip_loss=_clip_loss(3.0),
    RLSPEC_CONVENTIONS={**RLSPEC_CONVENTIONS, "dual_clip": 3.0},
)

npg = SimpleNamespace(
    __doc__="NPG's natural step: 0.5 (F + 0.1 I)^-1 g, a fixed size that ignores max_kl.",
    natural_step=_npg_natural_step,
)

td3_actor = SimpleNamespace(
    __doc__="TD3's actor step (-critic(obs, policy(batch, eps=0.0).act).mean(), on the steps its delay allows) for the "
            "deterministic policy gradient: the second code path of DDPG's actor loss.",
    dpg_actor_loss=_td3_dpg_actor_loss,
)

crr_regulariser = SimpleNamespace(
    __doc__="DiscreteCRR's CQL regulariser, min_q_weight * (logsumexp_a Q - Q(s, a_data)), as the discrete CQL penalty: "
            "the second code path of DiscreteCQL's.",
    cql_penalty=_crr_cql_penalty,
)

value_clip = SimpleNamespace(
    __doc__="PPO(value_clip=True): the value loss max((R - V)^2, (R - V_old - clip(V - V_old, -eps_clip, eps_clip))^2), "
            "clipped by the policy's eps_clip.",
    ppo_update=_ppo_update(value_clip=True),
    RLSPEC_CONVENTIONS={**RLSPEC_CONVENTIONS, "value_clipping": "clip_eps"},
)

update = SimpleNamespace(
    __doc__="PPO.update(buffer, batch_size, repeat), the trainer's call: log pi_old is recomputed by _preprocess_batch from "
            "the policy at the start of the update, not the stored one.",
    ppo_update=_ppo_update_from_buffer,
    RLSPEC_XFAIL={"PPO-UPDATE-STORED-LOGP-OLD": "PPO.update never reads a stored log pi_old: _preprocess_batch recomputes it "
                  "from the policy at the start of the update (ppo.py:157-161), which in Tianshou's on-policy trainer is "
                  "the policy that collected the batch, so the first ratios are 1 as the math says; the clause's stored "
                  "values that differ from the policy's own cannot reach it"},
)

VARIANTS = ("dual_clip", "npg", "td3_actor", "crr_regulariser", "value_clip", "update")


# =============================================================================================
# Normalisation and the logged entropy (spec/clauses/35_normalisation.toml), kept in one section.
#
# - running_moments: ``tianshou.utils.RunningMeanStd()`` (count 0: the data's own statistics; its mean 0 and "std"
#   1 are then irrelevant), one ``update(batch)`` per batch (Chan's update with ``np.var``).
# - normalize_observations: ``env.venv_wrappers.VectorEnvNormObs`` over a ``DummyVectorEnv`` of N environments
#   replaying the columns (``reset()`` gives row 0, each ``step`` the next row); ``update_obs_rms`` is False from
#   step ``train_steps`` on. It normalises with ``RunningMeanStd.norm``: ``(x - mean) / sqrt(var + eps)`` with eps =
#   float32's machine epsilon, clipped to +-10 (declared).
# - diagnostic_entropy: the ``ent_loss`` statistics PPO's ``_update_with_batch`` returns (the mean over minibatches of
#   ``dist.entropy().mean()``), with a ``DiscreteActorPolicy`` whose actor returns the suite's logits (its default
#   ``dist_fn``, a Categorical over them), on the whole batch as one minibatch (declared ``diagnostic_average =
#   "per-call"``: Tianshou's ``Batch.split(merge_last=True)`` folds a smaller remainder into the last minibatch,
#   which the protocol's minibatches do not describe). Tianshou logs no approximate KL, clip fraction or explained
#   variance.

from tianshou.env import DummyVectorEnv  # noqa: E402
from tianshou.env.venv_wrappers import VectorEnvNormObs  # noqa: E402
from tianshou.utils import RunningMeanStd  # noqa: E402

RLSPEC_CONVENTIONS.update({
    "normalization_eps": float(np.finfo(np.float32).eps),  # RunningMeanStd(epsilon=np.finfo(np.float32).eps.item())
    "diagnostic_average": "per-call",  # the entropy of one _update_with_batch minibatch
    # count 0, sqrt(var + eps), clip_max 10, update then normalise, one RunningMeanStd for the vector env: defaults
})


def running_moments(x, batch_end):
    """RunningMeanStd().update(batch) per batch."""
    rms = RunningMeanStd()
    start = 0
    for end in np.flatnonzero(batch_end):
        rms.update(x[start:end + 1])
        start = end + 1
    return np.asarray(rms.mean, dtype=np.float64), np.asarray(rms.var, dtype=np.float64), np.asarray(float(rms.count))


class _NormReplay(gym.Env):
    """One column of observations: reset() returns the current row, step() the next one (never ends)."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, observations):
        self.observations = np.asarray(observations, dtype=np.float64)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, self.observations.shape[1:], np.float64)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        return self.observations[min(self.t, len(self.observations) - 1)].copy(), {}

    def step(self, action):
        self.t += 1
        return self.observations[min(self.t, len(self.observations) - 1)].copy(), 0.0, False, False, {}


def normalize_observations(obs, train_steps):
    """VectorEnvNormObs(DummyVectorEnv(columns)): reset(), then one step per row; update_obs_rms = t < train_steps."""
    T, N, _ = obs.shape
    env = VectorEnvNormObs(DummyVectorEnv([(lambda j=j: _NormReplay(obs[:, j])) for j in range(N)]))
    try:
        env.update_obs_rms = train_steps > 0
        out = [env.reset()[0]]
        for t in range(1, T):
            env.update_obs_rms = t < train_steps
            out.append(env.step(np.zeros(N, dtype=np.int64))[0])
    finally:
        env.close()
    return np.stack(out).astype(np.float64)


class _Logits(torch.nn.Module):
    """obs (the sample's index) -> the suite's logits of that sample (a Categorical actor's output)."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits
        self.unused = torch.nn.Parameter(torch.zeros(1))  # Tianshou builds an optimizer over the parameters

    def forward(self, obs, state=None, info=None):
        return self.logits[torch.as_tensor(obs, dtype=torch.long).reshape(-1)] + 0 * self.unused, state


def diagnostic_entropy(logits, minibatch_end=None):
    """PPO._update_with_batch(...).ent_loss.mean: the Categorical entropies of the suite's logits, one minibatch."""
    if minibatch_end is not None:
        raise ValueError("declared diagnostic_average = 'per-call': one minibatch per call")
    logits = torch.as_tensor(np.asarray(logits), dtype=torch.float32)
    n = logits.shape[0]
    policy = DiscreteActorPolicy(actor=_Logits(logits), action_space=gym.spaces.Discrete(logits.shape[1]))
    algorithm = PPO(policy=policy, critic=_Lookup(torch.zeros(n), actor=False), optim=AdamOptimizerFactory(), **_PPO)
    algorithm.optim.step = lambda loss, *args, **kwargs: None  # the statistics only: nothing is stepped
    zeros = torch.zeros(n)
    batch = Batch(obs=np.arange(n), act=torch.zeros(n, dtype=torch.long), logp_old=zeros, adv=zeros, returns=zeros,
                  v_s=zeros, info=Batch())
    stats = algorithm._update_with_batch(batch, batch_size=None, repeat=1)
    return np.asarray(stats.ent_loss.mean, dtype=np.float32)

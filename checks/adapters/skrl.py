"""Built-in adapter ``skrl``: skrl (written against 2.1.1, torch backend) through its real code paths.

    pip install "rlspec[skrl]"
    rlspec check --candidate skrl                          # skrl's defaults (time_limit_bootstrap=False)
    rlspec check --candidate skrl:time_limit_bootstrap     # the same agent with time_limit_bootstrap=True

What each operation drives (paths in ``site-packages/skrl``):

- ``gae`` (default candidate): ``agents.torch.ppo.ppo.compute_gae`` with ``time_limit_bootstrap``
  False, skrl's default (``ppo_cfg.py``). With that setting the agent's ``record_transition`` stores
  the transition unchanged, so ``compute_gae`` on the stored tensors *is* the whole path. Layout as
  in skrl's memory: ``(T, N, 1)`` float32, ``last_values = V(next observation of the last step)``.
  ``compute_gae`` returns the returns and advantages normalised over the whole rollout; the raw
  advantages are ``returns - values`` (computed exactly in float64 from the two float32 arrays).
- ``gae`` (``skrl:time_limit_bootstrap``): a real ``PPO`` agent with ``time_limit_bootstrap=True``
  per environment (column): ``act`` then ``record_transition`` with the column's T steps at once
  (skrl's memory stores a multi-sample add for one environment step after step, and the fold-in
  ``rewards += gamma V(next observation) * truncated`` is elementwise, so it runs on every step as it
  would step by step, at a fraction of the cost), then ``compute_gae`` on the agent's memory with its
  configuration and ``last_values`` from the last next observation, as ``update()`` begins (its PPO
  epochs after that do not change the returns). The value model reads V(state) from the observation.
- ``ppo_clip_loss``, ``ppo_value_loss``, ``ppo_entropy_loss``: one real ``PPO.update()`` (one epoch,
  one minibatch) on a memory filled by ``act`` + ``record_transition`` with the suite's
  ``logp_old`` and ``old_values``. ``update()`` always recomputes and normalises the advantages with
  ``compute_gae``; for these operations the module's ``compute_gae`` is replaced, for the duration of
  the call, by one that returns the suite's advantages and returns (everything after it is skrl's own
  code). The models return the suite's ``logp_new`` / ``values`` / ``entropy`` as leaf tensors, so
  their ``.grad`` after ``update()``'s backward is skrl's gradient; the loss value is what
  ``update()`` tracks (``Loss / Policy loss``, ``Loss / Value loss``, ``Loss / Entropy loss``). The
  operation returns a float32 scalar with that value and that gradient (first order).
  ``value_loss_scale`` is set to 1 (it is the critic's coefficient, 2.5 by default): the protocol's
  value loss is the squared error itself.
- ``normalize_advantages``: ``compute_gae``'s own normalisation (its second output) of a rollout
  whose raw advantages are the suite's (rewards = A, values = 0, discount 0).
- ``diag_gaussian_log_prob``, ``diag_gaussian_entropy``: ``GaussianMixin.act`` with ``taken_actions``
  and ``GaussianMixin.get_entropy``, with the mixin's defaults (``clip_actions=False``,
  ``clip_log_std=True``: the log-std is clamped to [-20, 2] first, so the entropy of a log-std of 3
  is that of 2, ``skrl.xfail``); the variant ``unclamped_log_std`` passes ``clip_log_std=False``.
- ``trpo_update``: one real ``TRPO.update()`` with skrl's defaults (damping 0.1, accept_ratio 0.5,
  backtracking 0.5) whose policy is the suite's ``policy(theta)``, on a one-step rollout of B
  environments whose rewards are the suite's advantages (values 0, discount 0): skrl's own
  ``compute_gae`` turns them into those advantages and standardises them, as it always does
  (declared ``trpo_advantage_normalization``). skrl's TRPO reads ``mean_actions`` and ``log_std``:
  Gaussian policies only (declared ``trpo_policy_families``; a categorical one raises KeyError
  'mean_actions' in skrl). ``fisher_vector_product``: the module's function on that policy.

- ``conjugate_gradient``: ``agents.torch.trpo.trpo.conjugate_gradient`` (x0 = 0), whose matrix is
  ``fisher_vector_product`` of a policy: the module's ``fisher_vector_product`` is replaced, for the
  call, by the suite's ``matvec`` (damping 0), so the loop is skrl's and the matrix the suite's.
- ``natural_step``, ``line_search``: one real ``TRPO.update()`` on a one-sample memory
  (``compute_gae`` replaced as for PPO, advantage 1, log pi_old 0) with a scripted Gaussian policy.
  ``natural_step``: log pi(theta) has value 0 and gradient ``grad``; the mean is ``M theta`` with
  ``M' M = F`` (F built from ``fvp``, Cholesky) and log-std 0, so skrl's own closed-form Gaussian KL
  has Hessian F; the step is read at the first line-search trial (``theta_0 + full_step``).
  ``line_search``: log pi(theta) has value ``surrogate(theta) - surrogate(x0)`` and gradient
  ``fullstep``; the mean is ``[sqrt(c) (theta - theta.detach()), sqrt(2 kl(theta))]`` (the old
  policy's last entry 0), so the KL skrl computes is the suite's ``kl(theta)`` and its Hessian ``c I``
  with ``c = 2 max_kl / |fullstep|^2`` (damping 0): ``full_step`` is exactly ``fullstep``. skrl
  accepts a trial when ``(L - L_old) / expected_improvement > accept_ratio`` (0.5, its default,
  declared ``line_search_accept_ratio``): two samples with advantages +1 and -1 make skrl's surrogate
  exactly ``surrogate(theta) - surrogate(x0)`` and its gradient ``g`` with ``g'fullstep =
  expected_improve_rate``, which the suite passes to a candidate that declares the ratio. (skrl scales
  the prediction in place at every backtrack: docs/bugs-found.md.)

Off-policy (DDPG, TD3, SAC: ``agents/torch/{ddpg,td3,sac}``). Each network operation is one real
``update()`` of the agent (one gradient step, ``batch_size`` B) on a RandomMemory filled by the agent's own
``record_transition`` with the replay batch as one transition of B environments (observations
``(B, O + 1)`` float32, the last column the row's index: i at s, B + i at s', which the adapter's models
strip; actions ``(B, D)``, rewards and flags ``(B, 1)``). skrl stores ``terminated`` and drops
``truncated``, and its targets mask ``terminated`` alone: a truncated row bootstraps from the stored next
observation (the time-limit problem of ``compute_gae``, docs/bugs-found.md #1, is not in these agents).
The memory samples without replacement (skrl's default): update()'s batch is the whole memory in a random
order, put back in row order from ``memory.sampling_indexes``. The suite's networks are loaded into skrl
models as float32 copies (``DeterministicMixin`` with its defaults around the suite's actor / critic; the
critic answers a (B, 1) column); target networks are loaded after the agent's constructor, which
hard-copies the online networks into them. Learning rates are 0: update() computes skrl's targets, losses
and gradients, and its optimizers' steps leave every network as the suite gave it (the losses are read,
not applied; the suite's own modules are never touched).

- ``td_target``: DDPG.update()'s target line ``r + discount_factor * terminated.logical_not() * Q'`` with a
  target critic that answers ``next_q`` by row (the actor and critic are zero tables); DDPG, TD3 and SAC
  mask the same stored flag. The targets are read as the tensor update() passes to ``F.mse_loss`` (the
  agent module's ``F`` is, for the call, a proxy that records that argument and calls the real one).
- ``ddpg_critic_target``: DDPG.update() with policy, target_policy, critic, target_critic the suite's four
  networks; the targets read as for ``td_target``.
- ``td3_critic_target``: TD3.update() with the suite's six networks, the action space ``Box(low, high)``
  (update() clamps the noisy target action to its limits) and ``smooth_regularization_clip = noise_clip``.
  The suite's smoothing noise is delivered through skrl's noise interface: ``smooth_regularization_noise``
  is a ``Noise`` whose ``sample()`` returns the suite's draws for the rows the memory has just sampled.
  (skrl's default ``smooth_regularization_noise`` is None: TD3 then adds no target-policy smoothing at all
  and logs a warning, a choice its author explains in Toni-SM/skrl #55: the noise is the user's to define;
  the protocol passes the noise, so the adapter configures it.)
- ``sac_critic_target``: SAC.update() with ``initial_entropy_value = alpha`` (the coefficient its first
  gradient step uses) and the suite's policy, critics and target critics. skrl ships no tanh-squashed
  Gaussian (``GaussianMixin`` samples an unbounded Normal), so the policy model is the adapter's, as a
  skrl user would write it: ``act`` returns ``tanh(u)``, ``u = mean + exp(log_std) noise`` with the suite's
  noise for the row, and ``log_prob`` = the Normal log-density of u (torch's ``Normal``, as GaussianMixin)
  minus the exact log-Jacobian ``2 (log 2 - u - softplus(-2u))``, summed over D (``tanh_log_prob_eps``
  keeps its default, None: it describes this model, not skrl). Everything else is SAC.update()'s.
- ``dpg_actor_loss``: DDPG.update()'s ``-critic_values.mean()`` (tracked ``Loss / Policy loss``). The
  returned float32 scalar has that value, and its gradient with respect to the suite's actor is the
  ``.grad`` update()'s backward left on the actor's copy; with respect to the critic, what the actor
  loss's backward sent into the critic's parameters (the critic model taps them when it scores actions
  that carry a gradient). skrl's actor loss does reach the critic: its ``policy_optimizer`` steps the
  actor alone and ``critic_optimizer.zero_grad()`` clears the critic before its next step (declared
  ``actor_loss_critic_gradient = "discarded"``).
- ``sac_actor_loss``: SAC.update()'s ``(alpha log_prob - min(Q1, Q2)).mean()`` at the policy's sample at s
  (tracked ``Loss / Policy loss``; SAC tracks only with ``write_interval > 0``, which at init() would open a
  TensorBoard writer: the agent is initialised with 0 and set to 1 afterwards, and nothing is written),
  gradients read back as for ``dpg_actor_loss`` (policy and both critics).
- ``sac_alpha_loss``: SAC.update()'s ``-(log_entropy_coefficient * (log_prob + target_entropy).detach()).mean()``
  (``learn_entropy=True``, its default; tracked ``Loss / Entropy loss``) with the agent's
  ``log_entropy_coefficient`` set to ``log_alpha``, the policy answering the suite's ``log_prob`` by row,
  ``action_space = Box(action_dim)`` and ``target_entropy`` passed or left None (skrl's default:
  ``-prod(action_space.shape)``, declared ``default_target_entropy_per_dim = -1``). Gradients: in log_alpha
  the ``.grad`` of ``log_entropy_coefficient``; in log_prob what the entropy backward sends into it (a hook
  on the leaf records each backward in order: the policy loss's first, the entropy loss's after it, if any).
- ``polyak_update``: ``Model.update_parameters(model, polyak=tau)`` (``models/torch/base.py``) on two skrl
  models of one float32 parameter vector each (polyak = 1 takes its copy branch).
- ``target_network_updates``: TD3.update() with ``policy_delay = period`` and ``polyak = tau`` (TD3 updates
  its target networks on the delayed steps, by ``update_parameters``), one update() per entry of
  ``gradient_steps`` with ``cfg.gradient_steps`` set to it (the agent and its ``_update_counter`` persist,
  as in training). The target is ``target_critic_1`` (loaded with ``target``); ``critic_1``'s parameters are
  set to ``online[n - 1]`` at the start of step n, when update() samples its batch (a RandomMemory whose
  ``sample`` first calls the adapter's hook, which also records the target after the previous step).
- ``td3_actor_update_steps``: TD3.update() with ``policy_delay`` and skrl's default learning rate (1e-3) and
  polyak (0.005), on one-parameter networks that every step moves (the actor ascends Q = a + c, the critic
  chases a target near 1): ``actor_updates`` is 1 on the steps that moved the actor's parameter,
  ``target_updates`` the fraction of the three target networks that moved (1: all, as TD3 updates them
  together).

Two more code paths are variants (``VARIANTS``): ``skrl:td3``, ``dpg_actor_loss`` through TD3.update()
(critic_1, on the delayed second step of policy_delay 2), and ``skrl:dqn``, ``target_network_updates``
through DQN.update() (``target_update_interval`` and ``polyak``). Both pass every clause they provide.

skrl 2.1.1 has no offline algorithms (no CQL, IQL or AWR in ``agents/torch``): the offline chapter is not
provided.

Precision: skrl's memory holds float32 tensors, so the adapter computes in float32 and declares
``RLSPEC_PRECISION = "float32"``. skrl has no tanh-squashed Gaussian (``tanh_gaussian_log_prob`` is
not provided). Deliberate deviations are listed in ``skrl.xfail``; defects stay red (see
docs/bugs-found.md).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
import math
import random
import warnings
from types import SimpleNamespace

import gymnasium
import numpy as np
import skrl
import torch
from skrl.agents.torch.base import ExperimentCfg
from skrl.agents.torch.ddpg import DDPG
from skrl.agents.torch.ddpg import ddpg as skrl_ddpg_module
from skrl.agents.torch.dqn import DQN
from skrl.agents.torch.ppo import PPO
from skrl.agents.torch.ppo import ppo as skrl_ppo_module
from skrl.agents.torch.ppo.ppo import compute_gae
from skrl.agents.torch.sac import SAC
from skrl.agents.torch.sac import sac as skrl_sac_module
from skrl.agents.torch.td3 import TD3
from skrl.agents.torch.td3 import td3 as skrl_td3_module
from skrl.agents.torch.trpo import TRPO
from skrl.agents.torch.trpo import trpo as skrl_trpo_module
from skrl.memories.torch import RandomMemory
from skrl.models.torch import DeterministicMixin, GaussianMixin, Model
from skrl.resources.noises.torch import Noise

WRITTEN_AGAINST = "2.1.1"
# The releases this adapter drives (``rlspec matrix --releases`` reads it without importing the library; docs/releases.md).
RELEASES = {
    "distribution": "skrl",
    "range": ">=2.0.0",
    "why": "2.0.0 refactored skrl's agents (dataclass configurations, observations apart from states, "
           "record_transition's signature), the API every operation here drives; 1.x agents take dict configurations",
}
RLSPEC_VERSION = f"skrl {skrl.__version__}"
RLSPEC_ARRAY = "numpy"  # gae takes numpy; the loss operations receive torch tensors from the suite
RLSPEC_PRECISION = "float32"  # skrl's memory is float32
RLSPEC_CONVENTIONS = {
    # PPO.update(), agents/torch/ppo/ppo.py:326-475; compute_gae lines 23-64
    "dual_clip": None,
    "value_loss_factor": 1.0,  # value_loss_scale * F.mse_loss: no 0.5 (the adapter sets value_loss_scale = 1)
    "advantage_std_ddof": 1,
    "advantage_eps": 1e-8,
    "advantage_eps_form": "std",  # (A - mean) / (std + 1e-8) inside compute_gae, always on
    "advantage_normalization": "batch",  # the whole rollout (T x N), before the minibatches
    "kl_stop": "minibatch",  # kl_threshold (0 = off) checked before each minibatch's step; break leaves the minibatch loop only
    "kl_stop_factor": 1.0,  # kl_divergence > kl_threshold
    "kl_stop_statistic": "last-minibatch",  # each minibatch's own k3, ((exp(x) - 1) - x).mean() on its rows
    # ppo_update (PPO.update(), ppo.py:326-475)
    "value_clipping": "config",  # value_clip (0.2 by default; <= 0: off): the adapter passes value_clip_eps, None -> 0
    "advantage_normalization_switch": "always",  # compute_gae standardises the advantages, no switch
    "minibatch_remainder": "balanced",  # memory.sample(mini_batches=...): np.array_split of one randperm per epoch
    "ppo_update_policy_families": ["categorical", "gaussian"],  # CategoricalMixin, GaussianMixin
    # facts about the library that no clause judges (not conventions):
    # value_clip_form: "clipped prediction only" (value_clip = 0.2 by default)
    # value_loss_scale: 2.5 (skrl's default critic coefficient)
    # time_limit_bootstrap: False (skrl's default: truncated steps are not bootstrapped and do not end the trace)
    # log_std_clamp: (-20.0, 2.0) (GaussianMixin(clip_log_std=True) default: skrl.xfail; variant unclamped_log_std)
    # storage_dtype: "float32"
    # TRPO.update(), agents/torch/trpo/trpo.py:435-544 (Gaussian policies only)
    "damping": 0.1,  # added to the Fisher-vector product, also inside the step normalisation
    "natural_step_cg_tol": 1e-10,  # conjugate_gradient(residual_tolerance=1e-10): stops once r.r < 1e-10
    "backtrack_factor": 0.5,  # step_fraction * 0.5**i
    # trpo.py:539: accept iff kl < max_kl_divergence (strict) and (L - L_old) / expected_improvement > accept_ratio
    "line_search_accept_ratio": 0.5,  # TRPO_CFG accept_ratio (trpo_cfg.py:113)
    "trpo_advantage_normalization": "batch",  # compute_gae always standardises: (A - mean) / (std + 1e-8)
    "trpo_policy_families": ["gaussian"],  # kl_divergence reads outputs["mean_actions"] and ["log_std"] (trpo.py:155-183)
    # kl_direction: "KL(old || new)" (kl_divergence(policy_1=backup_policy, policy_2=policy))
    # DDPG / TD3 / SAC update() (agents/torch/{ddpg,td3,sac}), Model.update_parameters (models/torch/base.py:347-373)
    "update_phase": "end",  # td3.py:396-397: self._update_counter += 1, then `if not counter % policy_delay` (persists across update() calls)
    "target_update_kinds": ["polyak", "hard"],  # update_parameters(polyak=): mul_(1 - polyak), add_(polyak * theta); polyak == 1 copies
    # ddpg.py:356-361, td3.py:402-407, sac.py:371-382: the actor loss calls the critics with their live parameters;
    # policy_optimizer steps the policy alone and critic_optimizer.zero_grad() clears the critics' gradients before their own step
    "actor_loss_critic_gradient": "discarded",
    "alpha_loss_parameter": "log_alpha",  # sac.py:397: -(log_entropy_coefficient * (log_prob + target_entropy).detach()).mean()
    "default_target_entropy_per_dim": -1.0,  # sac.py:94-97: target_entropy None -> -prod(action_space.shape)
    # tanh_log_prob_eps: not skrl's (skrl has no squashed Gaussian): the adapter's SAC policy model uses the exact
    # form, the contract's default (None)
    # smooth_regularization_noise: None by default (TD3 adds no target-policy smoothing unless configured)
}


@contextlib.contextmanager
def _library_call():
    """skrl samples minibatches with torch's global RNG (and actions by rsample): seed it for a
    reproducible call and put every global RNG back afterwards."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.default_generator.manual_seed(0)  # the CPU generator only (manual_seed also walks CUDA)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)


def _float32(x) -> torch.Tensor:
    """As skrl's float32 models and memory hold it (the autograd graph, if any, is kept)."""
    return torch.as_tensor(x).to(torch.float32)


# ---------------------------------------------------------------------------------------------
# gae


def _as_memory(a, T: int, N: int, dtype=torch.float32) -> torch.Tensor:
    """Protocol (T,) or (T, N) -> skrl's memory layout (T, N, 1)."""
    return torch.as_tensor(np.asarray(a)).to(dtype).reshape(T, N, 1)


def _from_memory(x: torch.Tensor, one_column: bool) -> np.ndarray:
    x = x.detach().reshape(x.shape[0], -1).numpy()
    return x[:, 0] if one_column else x


def _raw_advantages(returns: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """returns - values, exact: both are float32, their difference is computed in float64."""
    return returns.double() - values.double()


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """compute_gae with time_limit_bootstrap=False (skrl's default), as the agent's update() calls it."""
    one_column = np.ndim(rewards) == 1
    T, N = len(rewards), (1 if one_column else np.shape(rewards)[1])
    v = _as_memory(values, T, N)
    returns, _ = compute_gae(
        rewards=_as_memory(rewards, T, N), terminated=_as_memory(terminated, T, N, torch.bool),
        truncated=_as_memory(truncated, T, N, torch.bool), values=v, last_values=_as_memory(next_values, T, N)[-1],
        discount_factor=float(gamma), lambda_coefficient=float(lam), time_limit_bootstrap=False,
    )
    advantages = _raw_advantages(returns, v)
    return _from_memory(advantages, one_column), _from_memory(returns, one_column).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# controlled models


_OBSERVATION = gymnasium.spaces.Box(-np.inf, np.inf, (1,), np.float32)
_ACTION = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)


class _Given(Model):
    """A model that answers from tensors the adapter provides, row i for observation [i].

    ``role`` "policy": ``act`` returns ``log_prob`` (the stored one while collecting, the suite's
    leaf during the update) and ``get_entropy`` the suite's entropy of the last rows; role "value":
    ``act`` returns the stored or the suite's values. ``reads_observation``: V(obs) = obs[0] instead
    (the critic of the GAE runs). One unused parameter keeps skrl's Adam constructor satisfied.
    """

    def __init__(self, role: str, *, reads_observation: bool = False):
        Model.__init__(self, observation_space=_OBSERVATION, action_space=_ACTION, device="cpu")
        self.role, self.reads_observation = role, reads_observation
        self.unused = torch.nn.Parameter(torch.zeros(1))
        self.collecting, self.stored, self.given, self.entropy = True, None, None, None
        self._rows = None

    def compute(self, inputs, role=""):  # pragma: no cover - act() answers directly
        raise NotImplementedError

    def act(self, inputs, *, role=""):
        observations = inputs["observations"]
        n = observations.shape[0]
        if self.reads_observation:
            return observations[:, :1], {}
        # adds exactly 0; gives update()'s backward a graph when nothing else does
        anchor = 0.0 * self.unused if not self.collecting else 0.0
        rows = observations[:, 0].long()
        self._rows = rows
        source = self.stored if self.collecting else self.given
        column = (source[rows] if source is not None else torch.zeros(n)).reshape(n, 1) + anchor
        if self.role == "value":
            return column, {}
        return torch.zeros(n, 1), {"log_prob": column}

    def get_entropy(self, *, role=""):
        return self.entropy[self._rows].reshape(-1, 1)

    def distribution(self, *, role=""):
        return torch.distributions.Normal(torch.zeros(1), torch.ones(1))  # only its stddev is logged


def _agent(num_envs: int, memory_size: int, policy: Model, value: Model, **cfg) -> PPO:
    """A real skrl PPO agent over a fresh RandomMemory; writes nothing to disk."""
    memory = RandomMemory(memory_size=memory_size, num_envs=num_envs, device="cpu")
    settings = {"rollouts": memory_size, "learning_epochs": 1, "mini_batches": 1, **cfg,
                "experiment": ExperimentCfg(write_interval=0, checkpoint_interval=0)}
    agent = PPO(models={"policy": policy, "value": value}, memory=memory, observation_space=_OBSERVATION,
                action_space=_ACTION, device="cpu", cfg=settings)
    agent.init()
    agent.enable_training_mode(True)
    return agent


def _step(agent: PPO, observations, rewards, next_observations, terminated, truncated, t: int, T: int) -> None:
    """One environment step as skrl's trainer makes it: act, then record_transition."""
    actions, _ = agent.act(observations, None, timestep=t, timesteps=T)
    agent.record_transition(observations=observations, states=None, actions=actions, rewards=rewards,
                            next_observations=next_observations, next_states=None, terminated=terminated,
                            truncated=truncated, infos={}, timestep=t, timesteps=T)


def _gae_time_limit_bootstrap(rewards, values, next_values, terminated, truncated, gamma, lam):
    """The agent with time_limit_bootstrap=True, fed the rollout (see the module docstring)."""
    one_column = np.ndim(rewards) == 1
    T, N = len(rewards), (1 if one_column else np.shape(rewards)[1])
    r, v, nv = (_as_memory(a, T, N) for a in (rewards, values, next_values))
    term, trunc = _as_memory(terminated, T, N, torch.bool), _as_memory(truncated, T, N, torch.bool)
    columns = []
    with _library_call():
        for j in range(N):  # one agent per environment: its memory takes the column's T steps at once
            agent = _agent(1, T, _Given("policy"), _Given("value", reads_observation=True), discount_factor=float(gamma),
                           gae_lambda=float(lam), time_limit_bootstrap=True)
            with torch.no_grad():  # as skrl's trainers step the agent
                # the observation of a state is its value; record_transition adds to the rewards in place
                _step(agent, v[:, j], r[:, j].clone(), nv[:, j], term[:, j], trunc[:, j], 0, 1)
            # update()'s first step (ppo.py:333-351) on the agent's memory and configuration; the PPO
            # epochs that follow it do not touch the returns
            memory, cfg = agent.memory, agent.cfg
            stored_values = memory.get_tensor_by_name("values")
            last_values, _ = agent.value.act({"observations": agent._current_next_observations[-1:]}, role="value")
            returns, _ = compute_gae(
                rewards=memory.get_tensor_by_name("rewards"), terminated=memory.get_tensor_by_name("terminated"),
                truncated=_stored_truncated(memory), values=stored_values, last_values=last_values,
                discount_factor=cfg.discount_factor, lambda_coefficient=cfg.gae_lambda,
                time_limit_bootstrap=cfg.time_limit_bootstrap,
            )
            columns.append((returns, stored_values))
    returns = torch.cat([c[0] for c in columns], dim=1)
    advantages = _raw_advantages(returns, torch.cat([c[1] for c in columns], dim=1))
    return _from_memory(advantages, one_column), _from_memory(returns, one_column).astype(np.float32)


time_limit_bootstrap = SimpleNamespace(
    __doc__="skrl's PPO agent with time_limit_bootstrap=True: record_transition folds gamma V(next obs) into "
    "the reward of a truncated step and compute_gae ends the trace there.",
    gae=_gae_time_limit_bootstrap,
    RLSPEC_CONVENTIONS=dict(RLSPEC_CONVENTIONS),
)


# ---------------------------------------------------------------------------------------------
# the PPO losses through PPO.update()


@contextlib.contextmanager
def _advantages_given(returns: torch.Tensor, advantages: torch.Tensor):
    """For the duration of an update(): the PPO module's compute_gae returns these (B, 1, 1) tensors."""
    original = skrl_ppo_module.compute_gae
    skrl_ppo_module.compute_gae = lambda **_: (returns.reshape(1, -1, 1), advantages.reshape(1, -1, 1))
    try:
        yield
    finally:
        skrl_ppo_module.compute_gae = original


def _update(*, logp_new, logp_old, advantages=None, values=None, returns=None, old_values=None, entropy=None,
            ratio_clip=0.2, value_clip=0.0, entropy_loss_scale=0.0):
    """One real PPO.update() on B samples (one step of B environments); returns (tracked data, leaves)."""
    n = int(torch.as_tensor(logp_old).numel())
    zeros = torch.zeros(n)
    leaf = lambda x: (zeros if x is None else _float32(x).detach().reshape(n)).clone().requires_grad_(True)
    column = lambda x: (zeros if x is None else _float32(x).detach().reshape(n)).reshape(n, 1)
    policy, value = _Given("policy"), _Given("value")
    policy.stored, value.stored = column(logp_old), column(old_values)
    leaves = {"log_prob": leaf(logp_new), "values": leaf(values), "entropy": leaf(entropy)}
    with _library_call():
        agent = _agent(n, 1, policy, value, ratio_clip=float(ratio_clip), value_clip=float(value_clip),
                       value_loss_scale=1.0, entropy_loss_scale=float(entropy_loss_scale))
        index = torch.arange(n, dtype=torch.float32).reshape(n, 1)
        no = torch.zeros(n, 1, dtype=torch.bool)
        _step(agent, index, torch.zeros(n, 1), index, no, no, 0, 1)
        policy.collecting = value.collecting = False
        policy.given, value.given, policy.entropy = leaves["log_prob"], leaves["values"], leaves["entropy"]
        with _advantages_given(column(returns), column(advantages)):
            agent.update(timestep=0, timesteps=1)
    tracked = {k: v[-1] for k, v in agent.tracking_data.items()}
    return tracked, leaves


def _expose(value: float, *pairs) -> torch.Tensor:
    """A float32 scalar equal to the loss update() tracked whose gradient with respect to each suite
    input ``x`` is the gradient update() left on the matching leaf (first order, exact values)."""
    out = torch.tensor(float(value), dtype=torch.float32)
    for x, leaf in pairs:
        if isinstance(x, torch.Tensor) and x.requires_grad:
            grad = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
            out = out + ((x - x.detach()) * grad.reshape(x.shape).to(x.dtype)).sum().to(torch.float32)
    return out


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    tracked, leaves = _update(logp_new=logp_new, logp_old=logp_old, advantages=advantages, ratio_clip=clip_eps)
    return _expose(tracked["Loss / Policy loss"], (logp_new, leaves["log_prob"]))


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    clipped = old_values is not None and clip_eps is not None
    zeros = torch.zeros(len(values))
    tracked, leaves = _update(logp_new=zeros, logp_old=zeros, values=values, returns=returns,
                              old_values=old_values if clipped else None, value_clip=clip_eps if clipped else 0.0)
    return _expose(tracked["Loss / Value loss"], (values, leaves["values"]))


def ppo_entropy_loss(entropy, coef):
    """update()'s entropy term, -entropy_loss_scale * mean(entropy) (with a scale of 0 skrl adds the
    constant 0 and tracks nothing)."""
    zeros = torch.zeros(len(entropy))
    tracked, leaves = _update(logp_new=zeros, logp_old=zeros, entropy=entropy, entropy_loss_scale=coef)
    return _expose(tracked.get("Loss / Entropy loss", 0.0), (entropy, leaves["entropy"]))


def normalize_advantages(advantages):
    """compute_gae's second output for raw advantages A: rewards A, values 0, discount 0."""
    A = _float32(advantages).detach().reshape(-1, 1, 1)
    zeros = torch.zeros_like(A)
    no = torch.zeros_like(A, dtype=torch.bool)
    _, normalised = compute_gae(rewards=A, terminated=no, truncated=no, values=zeros, last_values=zeros[-1],
                                discount_factor=0.0, lambda_coefficient=0.0)
    return normalised.reshape(-1)


# ---------------------------------------------------------------------------------------------
# a whole PPO update: PPO.update() as the trainer calls it, on the suite's module and optimizer


class _SuiteModel(Model):
    """The suite's ``policy(obs) -> (dist, values)`` as one skrl model shared by the roles "policy" and "value"
    (skrl's shared-model form: ``models={"policy": m, "value": m}``), as a skrl user would wrap a torch module.
    ``act`` with ``taken_actions`` answers the module's ``evaluate_actions`` (log pi summed over a Gaussian's
    dimensions, as GaussianMixin's default reduction, and the entropy ``get_entropy`` returns); role "value" its
    values. Observations and actions come from skrl's float32 memory and are cast to the module's dtype (one-hot
    rows survive the cast exactly). While ``collecting``, ``act`` answers what the collector stored (the suite's
    actions, ``logp_old`` and ``values_old``) without a forward: the rollout is the suite's."""

    def __init__(self, module, observation_space, action_space, stored):
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device="cpu")
        self.module = module  # registers the suite's parameters: parameters() is what skrl clips
        self.dtype = next(module.parameters()).dtype
        self.discrete = isinstance(action_space, gymnasium.spaces.Discrete)
        self.stored, self.collecting, self._entropy = stored, True, None

    def compute(self, inputs, role=""):  # pragma: no cover - act() answers directly
        raise NotImplementedError

    def act(self, inputs, *, role=""):
        if self.collecting:
            actions, logp_old, values_old = self.stored
            return (values_old, {}) if role == "value" else (actions, {"log_prob": logp_old})
        obs = inputs["observations"].to(self.dtype)
        if role == "value":
            return self.module(obs)[1].reshape(-1, 1), {}
        actions = inputs["taken_actions"]
        actions = actions.reshape(-1).long() if self.discrete else actions.to(self.dtype)
        _, log_prob, entropy = self.module.evaluate_actions(obs, actions)
        self._entropy = entropy.reshape(-1, 1)
        return actions, {"log_prob": log_prob.reshape(-1, 1)}  # (B, 1), as skrl's mixins return it

    def get_entropy(self, *, role=""):
        return self._entropy

    def distribution(self, *, role=""):
        return torch.distributions.Normal(torch.zeros(1), torch.ones(1))  # update() logs its stddev only


@contextlib.contextmanager
def _gae_normalising(returns: torch.Tensor, advantages: torch.Tensor):
    """For the duration of an update(): the PPO module's compute_gae returns the suite's returns and skrl's own
    normalisation of the suite's advantages, i.e. the real compute_gae on rewards A, values 0, every step
    terminated (its advantage is then r - v = A, which it standardises over the whole rollout, always)."""
    original = skrl_ppo_module.compute_gae

    def given(**_):
        A = advantages.reshape(1, -1, 1)
        zeros, done = torch.zeros_like(A), torch.ones_like(A, dtype=torch.bool)
        _, normalised = original(rewards=A, terminated=done, truncated=~done, values=zeros, last_values=zeros[-1])
        return returns.reshape(1, -1, 1), normalised

    skrl_ppo_module.compute_gae = given
    try:
        yield
    finally:
        skrl_ppo_module.compute_gae = original


@contextlib.contextmanager
def _seeded(seed: int):
    """update()'s minibatch order is RandomMemory.sample's ``torch.randperm`` on torch's global generator: seed it
    from the suite's seed for the call, and put every global RNG back."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.default_generator.manual_seed(int(seed))
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)


def _mini_batches(n: int, minibatch_size: int) -> int:
    """skrl takes a number of minibatches, not a size: ceil(B / minibatch_size), split by np.array_split into parts
    that differ by at most one sample (declared minibatch_remainder = "balanced")."""
    return max(1, -(-n // max(1, int(minibatch_size))))


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    """One real ``PPO.update()`` at skrl's defaults but for the protocol's hyperparameters at their skrl names
    (``learning_epochs``, ``mini_batches``, ``ratio_clip``, ``value_loss_scale = vf_coef``, ``entropy_loss_scale``,
    ``grad_norm_clip``, ``kl_threshold`` (0 = off), ``value_clip`` = value_clip_eps or 0 = off), on a memory of one
    transition of B environments recorded by the agent's own ``act`` + ``record_transition`` (observations,
    actions, ``log_prob`` = logp_old and ``values`` = values_old, float32 as skrl stores them), its ``optimizer``
    the suite's (skrl builds an Adam at construction; a user swaps it the same way). Returns nothing."""
    n = len(obs)
    discrete = not actions.is_floating_point()
    observation_space = gymnasium.spaces.Box(0.0, 1.0, (obs.shape[-1],), np.float32)
    if discrete:
        action_space = gymnasium.spaces.Discrete(int(actions.max()) + 1 if actions.numel() else 1)
    else:
        action_space = gymnasium.spaces.Box(-np.inf, np.inf, tuple(actions.shape[1:]), np.float32)
    column = lambda x: x.detach().to(torch.float32).reshape(n, 1)
    stored = (actions.detach().to(torch.float32).reshape(n, -1), column(logp_old), column(values_old))
    model = _SuiteModel(policy, observation_space, action_space, stored)
    target_kl, value_clip = config["target_kl"], config.get("value_clip_eps")
    cfg = {"rollouts": 1, "learning_epochs": int(config["epochs"]), "mini_batches": _mini_batches(n, config["minibatch_size"]),
           "ratio_clip": float(config["clip_eps"]), "value_clip": 0.0 if value_clip is None else float(value_clip),
           "value_loss_scale": float(config["vf_coef"]), "entropy_loss_scale": float(config["ent_coef"]),
           "grad_norm_clip": float(config["max_grad_norm"]), "kl_threshold": 0.0 if target_kl is None else float(target_kl),
           "experiment": ExperimentCfg(write_interval=0, checkpoint_interval=0)}
    training = policy.training
    with _seeded(config["seed"]):
        agent = PPO(models={"policy": model, "value": model}, memory=RandomMemory(memory_size=1, num_envs=n, device="cpu"),
                    observation_space=observation_space, action_space=action_space, device="cpu", cfg=cfg)
        agent.init()
        agent.optimizer = optimizer
        agent.enable_training_mode(True)
        observations = obs.detach().to(torch.float32)
        no = torch.zeros(n, 1, dtype=torch.bool)
        with torch.no_grad():  # as skrl's trainers step the agent
            _step(agent, observations, torch.zeros(n, 1), observations, no, no, 0, 1)
        model.collecting = False
        with _gae_normalising(returns.detach().to(torch.float32), advantages.detach().to(torch.float32)), torch.enable_grad():
            agent.enable_models_training_mode(True)  # post_interaction's three lines around update()
            agent.update(timestep=0, timesteps=1)
            agent.enable_models_training_mode(False)
    policy.train(training)
    return None


# ---------------------------------------------------------------------------------------------
# TRPO


def _vector(x) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float64)).reshape(-1).clone()


def _numpy_callable(function):
    """The suite's callable (numpy in, array-like out) as a torch float64 function."""
    return lambda v: _vector(function(v.detach().numpy().copy()))


@contextlib.contextmanager
def _fisher_given(matvec):
    """For the duration of a call: the TRPO module's fisher_vector_product is ``matvec(v) + damping v``."""
    original = skrl_trpo_module.fisher_vector_product
    skrl_trpo_module.fisher_vector_product = lambda *, vector, damping=0.1, **_: matvec(vector) + damping * vector
    try:
        yield
    finally:
        skrl_trpo_module.fisher_vector_product = original


def conjugate_gradient(matvec, b, iters, tol):
    with _fisher_given(_numpy_callable(matvec)):
        x = skrl_trpo_module.conjugate_gradient(policy=None, observations=None, states=None, b=_vector(b), damping=0.0,
                                                num_iterations=int(iters), residual_tolerance=float(tol))
    return x.numpy()


class _ScriptedGaussian(Model):
    """A skrl policy whose only parameter is ``theta`` (float64) and whose outputs come from a
    script: ``script(theta, backup) -> (log_prob, mean_actions)`` with log-std 0. ``seen`` records
    every ``theta`` it is evaluated at (the backup policy, a deep copy, records into the same list)."""

    def __init__(self, theta0, script, seen):
        Model.__init__(self, observation_space=_OBSERVATION, action_space=_ACTION, device="cpu")
        self.theta = torch.nn.Parameter(theta0.clone())
        self.script, self.seen, self.backup = script, seen, False

    def __deepcopy__(self, memo):
        twin = _ScriptedGaussian(self.theta.detach(), self.script, self.seen)
        twin.backup = True
        return twin

    def compute(self, inputs, role=""):  # pragma: no cover - act() answers directly
        raise NotImplementedError

    def act(self, inputs, *, role=""):
        rows = inputs["observations"][:, 0].long()  # the memory's sample i is observation [i] (it shuffles them)
        n = len(rows)
        if not self.backup:
            self.seen.append(self.theta.detach().clone())
        log_prob, mean = self.script(self.theta, self.backup)  # log_prob: one per sample
        mean = mean.reshape(1, -1).expand(n, -1)
        return torch.zeros(n, 1), {"log_prob": log_prob.reshape(-1)[rows].reshape(n, 1), "mean_actions": mean,
                                   "log_std": torch.zeros_like(mean)}

    def distribution(self, *, role=""):
        return torch.distributions.Normal(torch.zeros(1), torch.ones(1))  # only its stddev is logged


def _trpo_update(theta0, script, advantages, *, max_kl, cg_iters, damping, max_backtracks):
    """One real TRPO.update() (skrl's accept_ratio) on one sample per advantage (log pi_old 0), with
    compute_gae replaced by those advantages; returns (policy, evaluations)."""
    seen: list = []
    policy = _ScriptedGaussian(theta0, script, seen)
    value = _Given("value")
    n = len(advantages)
    index = torch.arange(n, dtype=torch.float32).reshape(n, 1)
    with _library_call():
        memory = RandomMemory(memory_size=1, num_envs=n, device="cpu")
        cfg = {"rollouts": 1, "learning_epochs": 1, "mini_batches": 1, "max_kl_divergence": float(max_kl),
               "conjugate_gradient_steps": int(cg_iters), "damping": float(damping),
               "max_backtrack_steps": int(max_backtracks),
               "experiment": ExperimentCfg(write_interval=0, checkpoint_interval=0)}
        agent = TRPO(models={"policy": policy, "value": value}, memory=memory, observation_space=_OBSERVATION,
                     action_space=_ACTION, device="cpu", cfg=cfg)
        agent.init()
        agent.enable_training_mode(True)
        no = torch.zeros(n, 1, dtype=torch.bool)
        _step(agent, index, torch.zeros(n, 1), index, no, no, 0, 1)
        value.collecting = False  # the critic's update after the policy's needs a graph
        del seen[:]  # the collection step's evaluation
        trpo_gae = skrl_trpo_module.compute_gae
        given = torch.as_tensor(advantages, dtype=torch.float32).reshape(1, n, 1)
        skrl_trpo_module.compute_gae = lambda **_: (torch.zeros_like(given), given)
        try:
            agent.update(timestep=0, timesteps=1)
        finally:
            skrl_trpo_module.compute_gae = trpo_gae
    return policy, seen


class _SuiteGaussian(Model):
    """A skrl policy whose only parameter is ``theta`` and whose Gaussian is the suite's
    ``policy(theta)`` (an ``Independent(Normal)`` over the batch): ``act`` answers for the rows of its
    observations (the memory's sample i is [i]) with ``mean_actions``, ``log_std`` and the log-prob
    of the suite's own actions. A suite policy that is not Gaussian has no ``mean_actions``: skrl's
    TRPO then fails as it does on a categorical policy (KeyError 'mean_actions')."""

    def __init__(self, policy, theta, actions):
        Model.__init__(self, observation_space=_OBSERVATION, action_space=_ACTION, device="cpu")
        self.suite_policy, self.suite_actions = policy, actions
        self.theta = torch.nn.Parameter(theta.detach().clone())

    def __deepcopy__(self, memo):
        return _SuiteGaussian(self.suite_policy, self.theta, self.suite_actions)

    def compute(self, inputs, role=""):  # pragma: no cover - act() answers directly
        raise NotImplementedError

    def act(self, inputs, *, role=""):
        rows = inputs["observations"][:, 0].long()
        distribution = self.suite_policy(self.theta)
        outputs = {"log_prob": distribution.log_prob(self.suite_actions)[rows].reshape(-1, 1)}
        base = getattr(distribution, "base_dist", distribution)
        if isinstance(base, torch.distributions.Normal):
            outputs["mean_actions"], outputs["log_std"] = base.loc[rows], base.scale.log()[rows]
        return torch.zeros(len(rows), 1), outputs

    def distribution(self, *, role=""):
        return torch.distributions.Normal(torch.zeros(1), torch.ones(1))  # only its stddev is logged


def trpo_update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks):
    """One real TRPO.update() with skrl's defaults (damping 0.1, accept_ratio 0.5, backtracking 0.5) on
    the suite's batch: a one-step rollout of B environments whose rewards are the suite's advantages,
    values 0 and discount 0, so skrl's own compute_gae turns them into exactly those advantages and
    standardises them, as it always does."""
    actions = actions.detach()
    n = int(policy(params.detach()).batch_shape[0])
    with torch.no_grad():
        logp_old = policy(params.detach()).log_prob(actions)
    model, value = _SuiteGaussian(policy, params, actions), _Given("value")
    with _library_call():
        cfg = {"rollouts": 1, "learning_epochs": 1, "mini_batches": 1, "max_kl_divergence": float(max_kl),
               "conjugate_gradient_steps": int(cg_iters), "max_backtrack_steps": int(max_backtracks),
               "discount_factor": 0.0, "experiment": ExperimentCfg(write_interval=0, checkpoint_interval=0)}
        agent = TRPO(models={"policy": model, "value": value}, memory=RandomMemory(memory_size=1, num_envs=n, device="cpu"),
                     observation_space=_OBSERVATION, action_space=_ACTION, device="cpu", cfg=cfg)
        agent.init()
        agent.enable_training_mode(True)
        index = torch.arange(n, dtype=torch.float32).reshape(n, 1)
        no = torch.zeros(n, 1, dtype=torch.bool)
        rewards = _float32(advantages).detach().reshape(n, 1)
        agent.memory.add_samples(observations=index, actions=torch.zeros(n, 1), rewards=rewards, terminated=no,
                                 truncated=no, log_prob=logp_old.reshape(n, 1), values=torch.zeros(n, 1))
        agent._current_next_observations = index  # what record_transition leaves for update()'s last values
        value.collecting = False  # the critic's update after the policy's needs a graph
        agent.update(timestep=0, timesteps=1)
    return model.theta.detach().to(torch.float32)  # the memory holds log pi_old as float32: judge at that precision


def fisher_vector_product(policy, params, v):
    """skrl's fisher_vector_product (Hessian of its Gaussian KL, plus damping 0.1 v) on the suite's policy."""
    with _library_call(), torch.no_grad():
        actions = policy(params.detach()).sample()  # any actions: only the KL's Hessian is read
    model = _SuiteGaussian(policy, params, actions)
    index = torch.arange(len(actions), dtype=torch.float32).reshape(-1, 1)
    return skrl_trpo_module.fisher_vector_product(policy=model, observations=index, states=None,
                                                  vector=v.detach().to(model.theta.dtype), damping=RLSPEC_CONVENTIONS["damping"])


def natural_step(grad, fvp, max_kl, cg_iters):
    g = _vector(grad)
    d = len(g)
    apply_fvp = _numpy_callable(fvp)
    F = torch.stack([apply_fvp(torch.eye(d, dtype=torch.float64)[i]) for i in range(d)], dim=1)  # column i = F e_i
    M = torch.linalg.cholesky(0.5 * (F + F.T)).T  # M' M = F: the KL 1/2 |M (theta - theta_0)|^2 has Hessian F
    theta0 = torch.zeros(d, dtype=torch.float64)

    def script(theta, backup):
        return (theta - theta.detach()) @ g, M @ theta

    policy, seen = _trpo_update(theta0, script, [1.0], max_kl=max_kl, cg_iters=cg_iters,
                                damping=RLSPEC_CONVENTIONS["damping"], max_backtracks=1)
    # evaluations: the surrogate's gradient, the CG's Hessian products, then the trial
    trials = [theta for theta in seen if not torch.equal(theta, theta0)]
    return (trials[0] - theta0).numpy()


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks, expected_improve_rate=None):
    """update()'s backtracking loop with skrl's accept_ratio (0.5) on a scripted policy whose surrogate is
    the suite's and whose gradient g has g'fullstep = expected_improve_rate (see the module docstring)."""
    if expected_improve_rate is None:
        raise ValueError("skrl's line search compares each gain with g'fullstep: pass expected_improve_rate")
    x0, f = _vector(x0), _vector(fullstep)
    norm2 = float(f @ f)
    c = 2.0 * float(max_kl) / norm2 if norm2 > 0 else 1.0  # KL curvature that makes update()'s full_step = fullstep
    g = float(expected_improve_rate) / norm2 * f if norm2 > 0 else f
    base = float(surrogate(x0.numpy().copy()))

    def script(theta, backup):
        """Two samples with advantages +1 and -1: skrl's surrogate mean(A exp(log pi)) is
        ((1 + 2 max(D, 0)) - (1 + 2 max(-D, 0))) / 2 = D = surrogate(theta) - surrogate(x0) at theta,
        and its gradient at x0 is g."""
        at = theta.detach()
        quadratic = (c ** 0.5) * (theta - at)
        if backup:
            return torch.zeros(2, dtype=torch.float64), torch.cat([quadratic, torch.zeros(1, dtype=torch.float64)])
        gain = float(surrogate(at.numpy().copy())) - base
        linear = (theta - at) @ g
        log_prob = torch.stack([math.log1p(2.0 * max(gain, 0.0)) + linear, math.log1p(2.0 * max(-gain, 0.0)) - linear])
        distance = torch.tensor([(2.0 * max(float(kl(at.numpy().copy())), 0.0)) ** 0.5], dtype=torch.float64)
        return log_prob, torch.cat([quadratic, distance])

    policy, _ = _trpo_update(x0, script, [1.0, -1.0], max_kl=max_kl, cg_iters=10, damping=0.0, max_backtracks=max_backtracks)
    return policy.theta.detach().numpy().copy()


# ---------------------------------------------------------------------------------------------
# Gaussian policies


class _GaussianHead(GaussianMixin, Model):
    """A skrl Gaussian model whose mean and log-std are the suite's (the observation is ignored), with
    GaussianMixin's defaults, or ``clip_log_std=False`` (variant ``unclamped_log_std``)."""

    def __init__(self, mean, log_std, **options):
        actions = gymnasium.spaces.Box(-np.inf, np.inf, (mean.shape[-1],))
        Model.__init__(self, observation_space=_OBSERVATION, action_space=actions, device="cpu")
        GaussianMixin.__init__(self, **options)
        self._mean, self._log_std = mean, log_std

    def compute(self, inputs, role=""):
        return self._mean, {"log_std": self._log_std}


def _gaussian(**options):
    def diag_gaussian_entropy(log_std):
        """GaussianMixin.get_entropy after an act(): the Normal's entropy summed over the action dims."""
        log_std = _float32(log_std)
        head = _GaussianHead(torch.zeros_like(log_std), log_std, **options)
        with _library_call():
            head.act({"observations": torch.zeros(len(log_std), 1)})
        return head.get_entropy(role="policy").reshape(-1)

    def diag_gaussian_log_prob(mean, log_std, action):
        mean, log_std, action = _float32(mean), _float32(log_std), _float32(action)
        with _library_call():
            head = _GaussianHead(mean, log_std, **options)
            _, outputs = head.act({"observations": torch.zeros(len(mean), 1), "taken_actions": action})
        return outputs["log_prob"].reshape(-1)

    return diag_gaussian_entropy, diag_gaussian_log_prob


diag_gaussian_entropy, diag_gaussian_log_prob = _gaussian()

unclamped_log_std = SimpleNamespace(
    __doc__="GaussianMixin(clip_log_std=False): the log-std as the model gives it, without the default clamp to "
    "[-20, 2].",
    **dict(zip(("diag_gaussian_entropy", "diag_gaussian_log_prob"), _gaussian(clip_log_std=False))),
)


# ---------------------------------------------------------------------------------------------
# off-policy: DDPG, TD3 and SAC through their update()


def _box(n: int, low=-np.inf, high=np.inf) -> gymnasium.spaces.Box:
    return gymnasium.spaces.Box(low, high, (n,), np.float32)


def _indexed(x, offset: int) -> torch.Tensor:
    """Observations (B, O) -> skrl's memory rows (B, O + 1): the last column is the row's index in the
    replay batch (offset B for the next observations), which the adapter's models strip."""
    x = _float32(x).detach().reshape(len(x), -1)
    return torch.cat([x, torch.arange(len(x), dtype=torch.float32).reshape(-1, 1) + offset], dim=1)


class _Wrapped(DeterministicMixin, Model):
    """A skrl deterministic model around a float32 copy of one of the suite's networks: an actor
    ``obs -> (B, D)`` or, ``critic=True``, a critic ``Q(obs, taken_actions)`` as a (B, 1) column (the
    layout of skrl's critics). DeterministicMixin's defaults (``clip_actions=False``).

    A critic called on actions that carry a gradient (update()'s actor loss: the critic's own loss scores the
    stored actions, its target runs under no_grad) evaluates its parameters through views whose hooks add
    the gradient that this call's backward sends into them to ``actor_loss_gradients``: what the actor loss
    writes into the critic (skrl's own ``.grad`` gets it too, unchanged)."""

    def __init__(self, net, observations: int, action_space, *, critic: bool = False):
        Model.__init__(self, observation_space=_box(observations + 1), action_space=action_space, device="cpu")
        DeterministicMixin.__init__(self)
        self.net = copy.deepcopy(net).to(torch.float32)
        self.is_critic = critic
        self.actor_loss_gradients = {}

    def _tapped(self, *args):
        def tap(name, p):
            view = p.view_as(p)
            view.register_hook(lambda g: self.actor_loss_gradients.__setitem__(
                name, g.detach().clone() + self.actor_loss_gradients.get(name, 0.0)))
            return view

        return torch.func.functional_call(self.net, {name: tap(name, p) for name, p in self.net.named_parameters()}, args)

    def compute(self, inputs, role=""):
        obs = inputs["observations"][:, :-1]
        if self.is_critic:
            actions = inputs["taken_actions"]
            q = self._tapped(obs, actions) if actions.requires_grad and torch.is_grad_enabled() else self.net(obs, actions)
            return q.reshape(-1, 1), {}
        return self.net(obs), {}


class _SquashedGaussian(Model):
    """The protocol's SAC policy as a skrl model. skrl ships no tanh-squashed Gaussian (GaussianMixin
    samples an unbounded Normal), so a skrl user writes this model; it is the one piece of the SAC paths
    that is the adapter's: ``act`` returns ``tanh(u)``, ``u = mean + exp(log_std) noise`` (rsample with the
    suite's draw for the row: rows 0..B-1 are at s, B..2B-1 at s'), and ``log_prob`` summed over the
    action dimensions as a (B, 1) column, GaussianMixin's Normal log-density of u minus the exact
    log-Jacobian 2 (log 2 - u - softplus(-2u))."""

    def __init__(self, net, observations: int, action_space, noise: torch.Tensor):
        Model.__init__(self, observation_space=_box(observations + 1), action_space=action_space, device="cpu")
        self.net = copy.deepcopy(net).to(torch.float32)
        self.noise = noise

    def compute(self, inputs, role=""):  # pragma: no cover - act() answers directly
        raise NotImplementedError

    def act(self, inputs, *, role=""):
        obs = inputs["observations"]
        mean, log_std = self.net(obs[:, :-1])
        std = log_std.exp()
        u = mean + std * self.noise[obs[:, -1].long()]
        jacobian = 2.0 * (math.log(2.0) - u - torch.nn.functional.softplus(-2.0 * u))
        log_prob = (torch.distributions.Normal(mean, std).log_prob(u) - jacobian).sum(-1, keepdim=True)
        return torch.tanh(u), {"log_prob": log_prob, "mean_actions": mean, "log_std": log_std}


class _Rows(DeterministicMixin, Model):
    """A skrl model that answers from a table, row i of its (2B, k) ``table`` for memory row i (the
    observation's index column), plus ``0 * anchor``: a parameter that gives skrl's optimizer something to
    hold and its backward a graph (it adds exactly 0). The actor, critics and policy of the operations
    whose inputs are numbers, not networks."""

    def __init__(self, table: torch.Tensor, action_space, *, log_prob: torch.Tensor | None = None):
        Model.__init__(self, observation_space=_box(1), action_space=action_space, device="cpu")
        DeterministicMixin.__init__(self)
        self.table, self.log_prob = table, log_prob
        self.anchor = torch.nn.Parameter(torch.zeros(1))

    def compute(self, inputs, role=""):
        rows = inputs["observations"][:, -1].long()
        return self.table[rows] + 0.0 * self.anchor, {}

    def act(self, inputs, *, role=""):
        actions, outputs = DeterministicMixin.act(self, inputs, role=role)
        if self.log_prob is not None:  # the SAC policy of sac_alpha_loss: the suite's log pi at s, 0 at s'
            padded = torch.cat([self.log_prob, torch.zeros_like(self.log_prob)])
            outputs = {**outputs, "log_prob": padded[inputs["observations"][:, -1].long()].reshape(-1, 1)}
        return actions, outputs


class _Scalar(DeterministicMixin, Model):
    """A tiny skrl model with one parameter vector ``theta``: as a policy it acts ``theta[0]`` in every
    state; as a critic ``Q(s, a) = a + theta[0]``; over a Discrete action space a Q-network answering
    ``theta[0]`` for every action. The networks of the schedule operations, whose only question is when
    skrl moves them."""

    def __init__(self, theta, *, critic: bool = False, action_space=None):
        Model.__init__(self, observation_space=_box(1), action_space=action_space or _box(1), device="cpu")
        DeterministicMixin.__init__(self)
        self.theta = torch.nn.Parameter(torch.as_tensor(np.asarray(theta, dtype=np.float64)).to(torch.float32).clone())
        self.is_critic = critic

    def compute(self, inputs, role=""):
        n = inputs["observations"].shape[0]
        if isinstance(self.action_space, gymnasium.spaces.Discrete):  # a Q-network: Q(s, .) = theta[0] for every action
            return self.theta[0] + torch.zeros(n, int(self.action_space.n)), {}
        if self.is_critic:
            return inputs["taken_actions"][:, :1] + self.theta[0], {}
        return self.theta[:1].expand(n, 1), {}


class _GivenNoise(Noise):
    """skrl's noise interface (``TD3_CFG.smooth_regularization_noise``) delivering the suite's draws:
    ``sample(size)`` returns the rows of the batch the agent's memory has just sampled (update() samples
    the batch, then the smoothing noise)."""

    def __init__(self, *, noise: torch.Tensor, memory: RandomMemory, device=None):
        super().__init__(device=device)
        self.noise, self.memory = noise, memory

    def sample(self, size):
        out = self.noise[self.memory.get_sampling_indexes()].clone()
        if tuple(out.shape) != tuple(size):
            raise RuntimeError(f"the smoothing noise has shape {tuple(out.shape)}; update() asked for {tuple(size)}")
        return out


class _SteppedMemory(RandomMemory):
    """A RandomMemory that calls ``on_sample()`` before sampling: update() samples once at the start of
    every gradient step, so the schedule operations look at (and set) the networks between steps there."""

    on_sample = None

    def sample(self, names, **kwargs):
        if self.on_sample is not None:
            self.on_sample()
        return super().sample(names, **kwargs)


@contextlib.contextmanager
def _offpolicy_call():
    """_library_call(), and skrl's logger raised to ERROR for the call (TD3 warns that no exploration
    noise is configured: update() never explores), then put back."""
    level = skrl.logger.level
    skrl.logger.setLevel(logging.ERROR)
    try:
        with _library_call():
            yield
    finally:
        skrl.logger.setLevel(level)


def _offpolicy_agent(cls, models: dict, observations: int, action_space, batch_size: int, *, memory=None,
                     track: bool = False, **cfg):
    """A real skrl agent over a fresh RandomMemory (one transition of ``batch_size`` environments, sampled
    without replacement: update()'s batch is the whole memory, in a random order) with learning rates 0:
    update() computes skrl's targets, losses and gradients and its optimizers' steps leave every network
    as the suite gave it (the losses are read, not applied). ``track``: SAC tracks its losses only when
    ``write_interval > 0``, which at init() would open a TensorBoard writer; the agent is initialised with
    0 (nothing on disk) and set to 1 afterwards (post_interaction, the only writer, is never called)."""
    memory = memory if memory is not None else RandomMemory(memory_size=1, num_envs=batch_size, device="cpu")
    settings = {"batch_size": batch_size, "learning_rate": 0.0, **cfg,
                "experiment": ExperimentCfg(write_interval=0, checkpoint_interval=0)}
    agent = cls(models=models, memory=memory, observation_space=_box(observations + 1), action_space=action_space,
                device="cpu", cfg=settings)
    agent.init()
    agent.enable_training_mode(True)
    agent.enable_models_training_mode(True)  # as post_interaction does around update()
    if track:
        agent.write_interval = 1
    return agent


def _load(model: Model, net) -> None:
    """A target network as the suite gives it: the agent's constructor hard-copies the online networks
    into the targets (update_parameters(polyak=1)), so the suite's targets are loaded afterwards."""
    with torch.no_grad():
        for mine, theirs in zip(model.net.parameters(), net.parameters()):
            mine.copy_(theirs.detach().to(mine.dtype))


def _record(agent, obs, actions, rewards, next_obs, terminated, truncated) -> None:
    """The replay batch as one transition of B environments, through the agent's record_transition (as
    skrl's trainers call it after each environment step); it stores ``terminated`` and drops ``truncated``."""
    B = len(obs)
    column = lambda x, dtype=torch.float32: torch.as_tensor(x).detach().to(dtype).reshape(B, 1)
    with torch.no_grad():
        agent.record_transition(observations=_indexed(obs, 0), states=None, actions=_float32(actions).detach().reshape(B, -1),
                                rewards=column(rewards), next_observations=_indexed(next_obs, B), next_states=None,
                                terminated=column(terminated, torch.bool), truncated=column(truncated, torch.bool),
                                infos={}, timestep=0, timesteps=1)


@contextlib.contextmanager
def _critic_targets(module):
    """For the duration of an update(): the agent module's ``F`` (torch.nn.functional) is a proxy whose
    ``mse_loss`` records its target argument, update()'s ``target_values``, and calls the real one."""
    original = module.F
    seen = []

    class Recording:
        def __getattr__(self, name):
            return getattr(original, name)

        @staticmethod
        def mse_loss(prediction, target, *args, **kwargs):
            seen.append(target.detach().clone())
            return original.mse_loss(prediction, target, *args, **kwargs)

    module.F = Recording()
    try:
        yield seen
    finally:
        module.F = original


def _targets(agent, module) -> torch.Tensor:
    """One update() (one gradient step); its critic targets in the replay batch's row order (B,)."""
    with _critic_targets(module) as seen:
        agent.update(timestep=0, timesteps=1)
    out = torch.empty_like(seen[0])
    out[agent.memory.get_sampling_indexes()] = seen[0]
    return out.reshape(-1)


def _with_gradients(value: float, pairs) -> torch.Tensor:
    """A float32 scalar equal to ``value`` whose gradient with respect to each suite tensor ``x`` of
    ``pairs`` (x, grad) is ``grad`` (first order, exact values): skrl's gradient read back onto the suite's
    inputs and parameters."""
    out = torch.tensor(float(value), dtype=torch.float32)
    for x, grad in pairs:
        if isinstance(x, torch.Tensor) and x.requires_grad:
            g = torch.zeros_like(x) if grad is None else grad.detach().reshape(x.shape).to(x.dtype)
            out = out + ((x - x.detach()) * g).sum().to(torch.float32)
    return out


def _parameter_gradients(suite_net, model) -> list:
    """(suite parameter, the .grad skrl's update() left on the model's copy of it)."""
    return list(zip(suite_net.parameters(), [p.grad for p in model.net.parameters()]))


def _actor_loss_gradients(suite_net, model) -> list:
    """(suite critic parameter, what update()'s actor loss sent into the model's copy of it)."""
    return [(p, model.actor_loss_gradients.get(name)) for name, p in suite_net.named_parameters()]


def _actions_of(actor, obs) -> torch.Tensor:
    """The actor's actions at obs, from a float32 copy (for the action dimension)."""
    with torch.no_grad():
        return copy.deepcopy(actor).to(torch.float32)(_float32(obs))


def _shape(obs, actions=None):
    B, O = obs.shape[0], obs.shape[1]
    return B, O, (None if actions is None else actions.shape[1])


def td_target(rewards, next_q, terminated, truncated, gamma):
    """DDPG.update()'s target line, r + discount_factor * terminated.logical_not() * Q', on a memory filled by
    record_transition: the target critic answers Q'(s'_i, .) = next_q[i] (the DDPG, TD3 and SAC targets
    mask the same stored flag)."""
    B = len(rewards)
    table = torch.cat([torch.zeros(B), _float32(next_q).reshape(B)]).reshape(2 * B, 1)
    zeros = torch.zeros(2 * B, 1)
    space = _box(1, -1.0, 1.0)
    with _offpolicy_call():
        models = {"policy": _Rows(zeros, space), "target_policy": _Rows(zeros, space), "critic": _Rows(zeros, space),
                  "target_critic": _Rows(table, space)}
        agent = _offpolicy_agent(DDPG, models, 0, space, B, discount_factor=float(gamma))
        _record(agent, torch.zeros(B, 0), torch.zeros(B, 1), rewards, torch.zeros(B, 0), terminated, truncated)
        return _targets(agent, skrl_ddpg_module).numpy()


def ddpg_critic_target(actor, critic, target_actor, target_critic, obs, actions, rewards, next_obs, terminated, truncated,
                       gamma):
    B, O, D = _shape(obs, actions)
    space = _box(D, -1.0, 1.0)
    with _offpolicy_call():
        models = {"policy": _Wrapped(actor, O, space), "target_policy": _Wrapped(target_actor, O, space),
                  "critic": _Wrapped(critic, O, space, critic=True), "target_critic": _Wrapped(target_critic, O, space, critic=True)}
        agent = _offpolicy_agent(DDPG, models, O, space, B, discount_factor=float(gamma))
        _load(agent.target_policy, target_actor)
        _load(agent.target_critic, target_critic)
        _record(agent, obs, actions, rewards, next_obs, terminated, truncated)
        return _targets(agent, skrl_ddpg_module)


def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    """TD3.update() with the suite's smoothing noise delivered through skrl's noise interface (skrl's
    default ``smooth_regularization_noise`` is None: no smoothing at all) and ``smooth_regularization_clip =
    noise_clip``; the action space is Box(low, high), whose limits update() clamps the noisy action to."""
    B, O, D = _shape(obs, actions)
    low, high = (np.asarray(_float32(x).detach().reshape(D)) for x in (low, high))
    space = gymnasium.spaces.Box(low, high, (D,), np.float32)
    with _offpolicy_call():
        models = {"policy": _Wrapped(actor, O, space), "target_policy": _Wrapped(target_actor, O, space),
                  "critic_1": _Wrapped(critic1, O, space, critic=True), "critic_2": _Wrapped(critic2, O, space, critic=True),
                  "target_critic_1": _Wrapped(target_critic1, O, space, critic=True),
                  "target_critic_2": _Wrapped(target_critic2, O, space, critic=True)}
        memory = RandomMemory(memory_size=1, num_envs=B, device="cpu")
        agent = _offpolicy_agent(TD3, models, O, space, B, memory=memory, discount_factor=float(gamma),
                                 smooth_regularization_noise=_GivenNoise,
                                 smooth_regularization_noise_kwargs={"noise": _float32(noise).detach().reshape(B, D), "memory": memory},
                                 smooth_regularization_clip=float(noise_clip))
        for model, net in ((agent.target_policy, target_actor), (agent.target_critic_1, target_critic1),
                           (agent.target_critic_2, target_critic2)):
            _load(model, net)
        _record(agent, obs, actions, rewards, next_obs, terminated, truncated)
        return _targets(agent, skrl_td3_module)


def _sac_agent(policy, critic1, critic2, obs, noise_at_s, noise_at_next, *, alpha, **cfg):
    B, O = obs.shape[0], obs.shape[1]
    D = noise_at_s.shape[1]
    space = _box(D, -1.0, 1.0)
    noise = torch.cat([noise_at_s, noise_at_next]).detach().to(torch.float32)
    models = {"policy": _SquashedGaussian(policy, O, space, noise), "critic_1": _Wrapped(critic1, O, space, critic=True),
              "critic_2": _Wrapped(critic2, O, space, critic=True), "target_critic_1": _Wrapped(critic1, O, space, critic=True),
              "target_critic_2": _Wrapped(critic2, O, space, critic=True)}
    return _offpolicy_agent(SAC, models, O, space, B, initial_entropy_value=float(alpha), track=True, **cfg)


def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs, terminated,
                      truncated, gamma, alpha, noise):
    """SAC.update() with ``initial_entropy_value = alpha`` (the coefficient its first gradient step uses)."""
    with _offpolicy_call():
        agent = _sac_agent(policy, critic1, critic2, obs, torch.zeros_like(_float32(noise)), _float32(noise), alpha=alpha,
                           discount_factor=float(gamma))
        _load(agent.target_critic_1, target_critic1)
        _load(agent.target_critic_2, target_critic2)
        _record(agent, obs, actions, rewards, next_obs, terminated, truncated)
        return _targets(agent, skrl_sac_module)


def dpg_actor_loss(actor, critic, obs):
    """DDPG.update()'s actor loss ``-critic_values.mean()`` (tracked ``Loss / Policy loss``) and the gradient
    its backward leaves on the actor's parameters."""
    B, O, D = _shape(obs, _actions_of(actor, obs))
    space = _box(D, -1.0, 1.0)
    with _offpolicy_call():
        models = {"policy": _Wrapped(actor, O, space), "target_policy": _Wrapped(actor, O, space),
                  "critic": _Wrapped(critic, O, space, critic=True), "target_critic": _Wrapped(critic, O, space, critic=True)}
        agent = _offpolicy_agent(DDPG, models, O, space, B)
        _record(agent, obs, torch.zeros(B, D), torch.zeros(B), obs, torch.zeros(B, dtype=torch.bool), torch.zeros(B, dtype=torch.bool))
        agent.update(timestep=0, timesteps=1)
    return _with_gradients(agent.tracking_data["Loss / Policy loss"][-1],
                           _parameter_gradients(actor, agent.policy) + _actor_loss_gradients(critic, agent.critic))


def sac_actor_loss(policy, critic1, critic2, obs, alpha, noise):
    """SAC.update()'s policy loss ``(alpha log_prob - min(Q1, Q2)).mean()`` (tracked ``Loss / Policy loss``) at a
    sample of the policy at s, and the gradient its backward leaves on the policy's parameters."""
    B = obs.shape[0]
    no = torch.zeros(B, dtype=torch.bool)
    with _offpolicy_call():
        noise = _float32(noise).detach()
        agent = _sac_agent(policy, critic1, critic2, obs, noise, torch.zeros_like(noise), alpha=alpha)
        _record(agent, obs, torch.zeros_like(noise), torch.zeros(B), obs, no, no)
        agent.update(timestep=0, timesteps=1)
    return _with_gradients(agent.tracking_data["Loss / Policy loss"][-1], _parameter_gradients(policy, agent.policy)
                           + _actor_loss_gradients(critic1, agent.critic_1) + _actor_loss_gradients(critic2, agent.critic_2))


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    """SAC.update()'s entropy loss ``-(log_entropy_coefficient * (log_prob + target_entropy).detach()).mean()``
    (``learn_entropy=True``, its default; tracked ``Loss / Entropy loss``): the agent's log-coefficient is set to
    ``log_alpha`` and its policy answers the suite's ``log_prob``. The gradient in log_alpha is the one the
    entropy backward leaves on ``log_entropy_coefficient``; the one in log_prob is what that backward sends
    into the policy's log_prob (a hook on the leaf records each backward in order: the policy loss's first,
    then the entropy loss's, if any)."""
    B, D = int(torch.as_tensor(log_prob).numel()), int(action_dim)
    leaf = _float32(log_prob).detach().reshape(B).clone().requires_grad_(True)
    backwards = []
    leaf.register_hook(lambda g: backwards.append(g.detach().clone()))
    space = _box(D, -1.0, 1.0)
    zeros = torch.zeros(2 * B, D)
    cfg = {} if target_entropy is None else {"target_entropy": float(target_entropy)}
    with _offpolicy_call():
        models = {"policy": _Rows(zeros, space, log_prob=leaf), **{name: _Rows(torch.zeros(2 * B, 1), space) for name in
                  ("critic_1", "critic_2", "target_critic_1", "target_critic_2")}}
        agent = _offpolicy_agent(SAC, models, 0, space, B, track=True, **cfg)
        with torch.no_grad():
            agent.log_entropy_coefficient.copy_(_float32(log_alpha).detach().reshape(1))
        no = torch.zeros(B, dtype=torch.bool)
        _record(agent, torch.zeros(B, 0), zeros[:B], torch.zeros(B), torch.zeros(B, 0), no, no)
        agent.update(timestep=0, timesteps=1)
    into_log_prob = sum(backwards[1:]) if len(backwards) > 1 else None
    return _with_gradients(agent.tracking_data["Loss / Entropy loss"][-1],
                           [(log_alpha, agent.log_entropy_coefficient.grad), (log_prob, into_log_prob)])


def polyak_update(target, online, tau):
    """``Model.update_parameters(model, polyak=tau)`` on two skrl models of one float32 parameter each
    (polyak = 1: its copy branch)."""
    mine, theirs = _Scalar(target), _Scalar(online)
    mine.update_parameters(theirs, polyak=float(tau))
    return mine.theta.detach().numpy().copy()


def _schedule(agent, gradient_steps, snapshot, before_step=None) -> list:
    """update() once per call with ``cfg.gradient_steps`` of that call (the agent, its counters and its
    memory persist across calls, as in training); returns snapshot() before step 1 and after every step.
    ``before_step(n)``: called at the start of step n (0-based), before update() samples its batch."""
    states = []

    def on_sample():
        states.append(snapshot())
        if before_step is not None:
            before_step(len(states) - 1)

    agent.memory.on_sample = on_sample
    for i, steps in enumerate(gradient_steps):
        agent.cfg.gradient_steps = int(steps)
        agent.update(timestep=i, timesteps=len(gradient_steps))
    states.append(snapshot())
    return states


def _td3_scalar_agent(policy_delay: int, polyak: float, *, learning_rate: float, critic_theta=(0.0,)):
    """TD3 over _Scalar networks and one stored transition (reward 1, not terminated)."""
    models = {"policy": _Scalar([0.0]), "target_policy": _Scalar([0.0]),
              "critic_1": _Scalar(critic_theta, critic=True), "critic_2": _Scalar(critic_theta, critic=True),
              "target_critic_1": _Scalar(critic_theta, critic=True), "target_critic_2": _Scalar(critic_theta, critic=True)}
    agent = _offpolicy_agent(TD3, models, 0, _box(1), 1, memory=_SteppedMemory(memory_size=1, num_envs=1, device="cpu"),
                             policy_delay=int(policy_delay), polyak=float(polyak), learning_rate=float(learning_rate))
    no = torch.zeros(1, dtype=torch.bool)
    _record(agent, torch.zeros(1, 0), torch.zeros(1, 1), torch.ones(1), torch.zeros(1, 0), no, no)
    return agent


def target_network_updates(target, online, tau, period, gradient_steps):
    """TD3.update() with ``policy_delay = period`` and ``polyak = tau`` (its target networks are updated on
    the delayed steps, by ``update_parameters(polyak=)``), one call per entry of gradient_steps: the target
    is target_critic_1 (loaded with ``target``), and critic_1's parameters are set to ``online[n - 1]`` at
    the start of step n (learning rates 0: skrl's critic step leaves them there)."""
    online = np.asarray(online, dtype=np.float64)
    with _offpolicy_call():
        agent = _td3_scalar_agent(period, tau, learning_rate=0.0, critic_theta=np.zeros(online.shape[1]))
        with torch.no_grad():
            agent.target_critic_1.theta.copy_(torch.as_tensor(np.asarray(target, dtype=np.float64)).to(torch.float32))

        def before_step(n):
            with torch.no_grad():
                agent.critic_1.theta.copy_(torch.as_tensor(online[n]).to(torch.float32))

        states = _schedule(agent, gradient_steps, lambda: agent.target_critic_1.theta.detach().clone(), before_step)
    return torch.stack(states[1:]).numpy()


def td3_actor_update_steps(gradient_steps, policy_delay):
    """TD3.update() with ``policy_delay`` and skrl's default learning rate and polyak, one call per entry of
    gradient_steps, on _Scalar networks whose every step moves them (the actor ascends Q = a + c, the critic
    chases a target of about 1): ``actor_updates`` is 1 on the steps that moved the actor's parameters,
    ``target_updates`` the fraction of the three target networks (target_policy, target_critic_1,
    target_critic_2) that moved (1: all of them, as TD3 updates them together)."""
    with _offpolicy_call():
        agent = _td3_scalar_agent(policy_delay, 0.005, learning_rate=1e-3)
        networks = (agent.policy, agent.target_policy, agent.target_critic_1, agent.target_critic_2)
        states = _schedule(agent, gradient_steps, lambda: [m.theta.detach().clone() for m in networks])
    moved = np.array([[not torch.equal(a, b) for a, b in zip(before, after)] for before, after in zip(states, states[1:])], dtype=float)
    return moved[:, 0], moved[:, 1:].mean(axis=1)


# ---------------------------------------------------------------------------------------------
# variants: the same operations through TD3's actor loss and DQN's target network


def _td3_dpg_actor_loss(actor, critic, obs):
    """TD3.update()'s actor loss ``-critic_values.mean()`` with critic_1 (tracked ``Loss / Policy loss``), on
    its default policy_delay = 2: one update() of two gradient steps, the actor's on the second."""
    B, O, D = _shape(obs, _actions_of(actor, obs))
    space = _box(D, -1.0, 1.0)
    with _offpolicy_call():
        models = {"policy": _Wrapped(actor, O, space), "target_policy": _Wrapped(actor, O, space),
                  **{name: _Wrapped(critic, O, space, critic=True) for name in ("critic_1", "critic_2", "target_critic_1", "target_critic_2")}}
        agent = _offpolicy_agent(TD3, models, O, space, B, gradient_steps=2)
        no = torch.zeros(B, dtype=torch.bool)
        _record(agent, obs, torch.zeros(B, D), torch.zeros(B), obs, no, no)
        agent.update(timestep=0, timesteps=1)
    return _with_gradients(agent.tracking_data["Loss / Policy loss"][-1], _parameter_gradients(actor, agent.policy)
                           + _actor_loss_gradients(critic, agent.critic_1) + _actor_loss_gradients(critic, agent.critic_2))


def _dqn_target_network_updates(target, online, tau, period, gradient_steps):
    """DQN.update() with ``target_update_interval = period`` and ``polyak = tau`` (its own counter of gradient
    steps, dqn.py:325-327), one call per entry of gradient_steps: the target is target_q_network (loaded with
    ``target``), the q_network's parameters are set to ``online[n - 1]`` at the start of step n (learning
    rate 0)."""
    online = np.asarray(online, dtype=np.float64)
    space = gymnasium.spaces.Discrete(2)
    with _offpolicy_call():
        models = {name: _Scalar(np.zeros(online.shape[1]), critic=True, action_space=space) for name in ("q_network", "target_q_network")}
        agent = _offpolicy_agent(DQN, models, 0, space, 1, memory=_SteppedMemory(memory_size=1, num_envs=1, device="cpu"),
                                 target_update_interval=int(period), polyak=float(tau))
        with torch.no_grad():
            agent.target_q_network.theta.copy_(torch.as_tensor(np.asarray(target, dtype=np.float64)).to(torch.float32))
        no = torch.zeros(1, dtype=torch.bool)
        _record(agent, torch.zeros(1, 0), torch.zeros(1, 1), torch.ones(1), torch.zeros(1, 0), no, no)

        def before_step(n):
            with torch.no_grad():
                agent.q_network.theta.copy_(torch.as_tensor(online[n]).to(torch.float32))

        states = _schedule(agent, gradient_steps, lambda: agent.target_q_network.theta.detach().clone(), before_step)
    return torch.stack(states[1:]).numpy()


td3 = SimpleNamespace(
    __doc__="skrl's TD3 agent for the deterministic actor loss: -critic_1(s, mu(s)).mean() on its delayed step "
    "(policy_delay 2), read from TD3.update().",
    dpg_actor_loss=_td3_dpg_actor_loss,
)
dqn = SimpleNamespace(
    __doc__="skrl's DQN agent for the target network's schedule: target_update_interval and polyak, counted by "
    "DQN.update()'s own gradient-step counter.",
    target_network_updates=_dqn_target_network_updates,
)
VARIANTS = ("time_limit_bootstrap", "unclamped_log_std", "td3", "dqn")


# ======================================================================================
# Normalisation (spec/clauses/35_normalisation.toml), kept in one section.
#
# skrl's ``resources.preprocessors.torch.RunningStandardScaler`` is the state (and value) preprocessor of its agents:
# float64 running buffers starting at count 1, mean 0, variance 1 (declared), each ``scaler(x, train=True)`` merging
# the batch's ``torch.mean(x, dim=0)`` and ``torch.var(x, dim=0)`` by ``_parallel_variance`` (Chan's update), then
# returning ``clamp((x - mean) / (sqrt(var) + epsilon), -5, 5)`` (epsilon 1e-8 on the std, clip_threshold 5: declared)
# in float32. The agents train it on their minibatches (``train=not epoch``) and apply it frozen when acting.
#
# - running_moments: ``scaler(batch, train=True)`` per batch (float32 tensors, as skrl's memory holds states); its
#   running_mean, running_variance and current_count.
# - merge_moments: ``_parallel_variance(mean_b, var_b, count_b)`` on a scaler holding (mean_a, var_a, count_a).
# - normalize_observations: ``scaler(obs[t], train=t < train_steps)`` per step, the N environments one batch.
#
# ``torch.var``'s default is the unbiased variance (divided by n - 1), merged as if it were the population one:
# docs/bugs-found.md.

from skrl.resources.preprocessors.torch import RunningStandardScaler  # noqa: E402

RLSPEC_CONVENTIONS.update({
    "moments_initial_count": 1.0,  # register_buffer("current_count", torch.ones(())): count 1, mean 0, variance 1
    "normalization_eps_form": "std",  # (x - mean) / (sqrt(var) + epsilon), epsilon 1e-8
    "observation_clip": 5.0,  # clip_threshold=5.0
})


def _scaler(size: int) -> RunningStandardScaler:
    return RunningStandardScaler(size, device="cpu")


def running_moments(x, batch_end):
    """RunningStandardScaler(D)(batch, train=True) per batch, on float32 tensors."""
    scaler = _scaler(x.shape[1])
    x = torch.as_tensor(np.asarray(x), dtype=torch.float32)
    start = 0
    for end in np.flatnonzero(batch_end):
        scaler(x[start:end + 1], train=True)
        start = end + 1
    return scaler.running_mean.clone(), scaler.running_variance.clone(), scaler.current_count.clone()


def merge_moments(mean_a, var_a, count_a, mean_b, var_b, count_b):
    """RunningStandardScaler._parallel_variance(mean_b, var_b, count_b) on a scaler holding (mean_a, var_a, count_a)."""
    scaler = _scaler(len(mean_a))
    as64 = lambda v: torch.as_tensor(np.asarray(v), dtype=torch.float64)
    scaler.running_mean, scaler.running_variance = as64(mean_a), as64(var_a)
    scaler.current_count = torch.tensor(float(count_a), dtype=torch.float64)
    scaler._parallel_variance(as64(mean_b), as64(var_b), float(count_b))
    return scaler.running_mean.clone(), scaler.running_variance.clone(), scaler.current_count.clone()


def normalize_observations(obs, train_steps):
    """scaler(obs[t], train=t < train_steps) per step: the N environments' observations are one batch."""
    T, N, D = obs.shape
    scaler = _scaler(D)
    x = torch.as_tensor(np.asarray(obs), dtype=torch.float32)
    return torch.stack([scaler(x[t], train=t < train_steps) for t in range(T)])

# ---------------------------------------------------------------------------------------------
# compatibility with older releases in RELEASES (nothing here changes what a current release runs)


def _stored_truncated(memory):
    """The memory's ``truncated`` tensor; skrl 2.0.0's PPO stores none (its compute_gae does not read it)."""
    return memory.get_tensor_by_name("truncated") if "truncated" in memory.tensors else None


def _compute_gae_2_0(original):
    """skrl 2.0.0's ``compute_gae(rewards, terminated, values, next_values, ...)`` under 2.1's keywords. 2.0.0 has no
    ``truncated`` and no ``time_limit_bootstrap`` (a truncated step never ends its trace there; with the option on,
    ``record_transition`` alone folds ``gamma V`` into the reward) and calls ``last_values`` ``next_values``."""

    def compute_gae(*, truncated=None, last_values, time_limit_bootstrap=False, **rest):
        return original(next_values=last_values, **rest)

    return compute_gae


if "truncated" not in inspect.signature(compute_gae).parameters:  # skrl 2.0.0: the functions above call this name
    compute_gae = _compute_gae_2_0(compute_gae)


def _memory_without_replacement(original):
    """skrl 2.0.0's RandomMemory samples *with* replacement by default (2.1.0 made it False). The off-policy operations
    feed one batch and read every row of it back (``sampling_indexes``), which needs each row drawn once; whether
    the rows come with replacement is not the math any clause judges."""

    class RandomMemory(original):
        def __init__(self, *args, replacement: bool = False, **kwargs):
            super().__init__(*args, replacement=replacement, **kwargs)

    return RandomMemory


if inspect.signature(RandomMemory.__init__).parameters["replacement"].default:  # skrl 2.0.0
    RandomMemory = _memory_without_replacement(RandomMemory)


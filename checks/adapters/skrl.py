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

Precision: skrl's memory holds float32 tensors, so the adapter computes in float32 and declares
``RLSPEC_PRECISION = "float32"``. skrl has no tanh-squashed Gaussian (``tanh_gaussian_log_prob`` is
not provided). Deliberate deviations are listed in ``skrl.xfail``; defects stay red (see
docs/bugs-found.md).
"""

from __future__ import annotations

import contextlib
import math
import random
import warnings
from types import SimpleNamespace

import gymnasium
import numpy as np
import skrl
import torch
from skrl.agents.torch.base import ExperimentCfg
from skrl.agents.torch.ppo import PPO
from skrl.agents.torch.ppo import ppo as skrl_ppo_module
from skrl.agents.torch.ppo.ppo import compute_gae
from skrl.agents.torch.trpo import TRPO
from skrl.agents.torch.trpo import trpo as skrl_trpo_module
from skrl.memories.torch import RandomMemory
from skrl.models.torch import GaussianMixin, Model

WRITTEN_AGAINST = "2.1.1"
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
    "kl_stop_factor": 1.0,
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
                truncated=memory.get_tensor_by_name("truncated"), values=stored_values, last_values=last_values,
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
VARIANTS = ("time_limit_bootstrap", "unclamped_log_std")


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

"""Built-in adapter ``tianshou``: Tianshou 2.0.1 through its real code paths.

    rlspec check --candidate tianshou             # the defaults (below)
    rlspec check --candidate tianshou:dual_clip   # PPO(dual_clip=3.0), declared

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
- ``conjugate_gradient``, ``fisher_vector_product``: ``NPG._conjugate_gradients`` and ``NPG._MVP`` (its
  damping 0.1). ``trpo_update``: TRPO with its defaults, ``_preprocess_batch`` (log pi_old, then the
  advantages standardised over the batch without an epsilon, declared ``trpo_advantage_normalization``)
  and one ``_update_with_batch``; only its GAE stage (``_add_returns_and_advantages``) answers with the
  suite's advantages. Variant ``npg``: NPG's natural step through the same two methods.
- ``tanh_gaussian_log_prob``: ``SACPolicy.forward``'s two lines with the draw fixed to the suite's
  pre-tanh action: ``Independent(Normal)`` log-density, then the public
  ``correct_log_prob_gaussian_tanh`` (the epsilon form ``log(1 - tanh(u)^2 + float32 eps)``).

Precision: ``_update_with_batch`` casts the ratios to float32 (``.exp().float()``, ppo.py:187)
whatever the data's dtype, so the PPO terms are judged by float32 bounds
(``RLSPEC_PRECISION = "float32"``); its GAE kernel computes in float64.

Conventions: no 0.5 on the value loss (``vf_coef`` is the only factor; the adapter sets it to 1);
advantages normalised per minibatch with the unbiased std plus 1e-8; the value clip radius is
``eps_clip``; no dual clip unless declared (variant ``dual_clip``). Declared deviations are in
``tianshou.xfail`` beside this file.
"""

from __future__ import annotations

import contextlib
import math
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import tianshou
import torch
from tianshou.algorithm import NPG, PPO, TRPO
from tianshou.algorithm import algorithm_base
from tianshou.algorithm.algorithm_base import Algorithm
from tianshou.algorithm.modelfree.reinforce import ProbabilisticActorPolicy
from tianshou.algorithm.modelfree.sac import correct_log_prob_gaussian_tanh
from tianshou.algorithm.optim import AdamOptimizerFactory, OptimizerFactory
from tianshou.data import Batch, ReplayBuffer, VectorReplayBuffer
from torch.distributions import Distribution, Independent, Normal, kl_divergence, register_kl

# Every Tianshou policy JIT-compiles these numba kernels when the first one is built (about 6 s,
# 30 s and more on a loaded 2-core machine, which the suite's per-clause time limit would count
# against the first clause). numba's on-disk cache (beside Tianshou's sources) keeps them
# compiled across processes; it changes nothing in what they compute.
for _kernel in (algorithm_base._gae, algorithm_base._nstep_return):
    _kernel.enable_caching()

RLSPEC_ARRAY = "numpy"
RLSPEC_PRECISION = "float32"  # PPO ratios are cast to float32 (see the module docstring)
RLSPEC_VERSION = f"tianshou {tianshou.__version__}"
RLSPEC_CONVENTIONS = {
    "dual_clip": None,  # PPO(dual_clip=None) by default
    "value_loss_factor": 1.0,  # (returns - value)^2, no 0.5 (ppo.py:204-208)
    "advantage_std_ddof": 1,  # torch's unbiased std
    "advantage_eps": 1e-8,  # (A - mean) / (std + 1e-8), a2c.py:113
    "advantage_eps_form": "std",
    "advantage_normalization": "minibatch",  # inside _update_with_batch
    "damping": 0.1,  # NPG._damping: the MVP is (F + 0.1 I) v, and TRPO scales its step with it
    "backtrack_factor": 0.8,  # TRPO(backtrack_coeff=0.8)
    # line_search_kl: "strict" (accepts when kl < max_kl and the loss went down)
    # NPG/TRPO(advantage_normalization=True), npg.py:136-137: (A - mean) / std, no epsilon, over the whole batch
    "trpo_advantage_normalization": "batch",
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
# a whole PPO update: PPO._update_with_batch with the suite's policy and optimizer


class _GivenOptimizer(OptimizerFactory):
    """The factory Tianshou builds its optimizer with, handing back the optimizer the suite gave."""

    def __init__(self, optimizer):
        super().__init__()
        self.optimizer = optimizer

    def _create_optimizer_for_params(self, params):
        return self.optimizer


class _SuiteHead(torch.nn.Module):
    """The suite's ``policy(obs) -> (dist, values)`` as Tianshou's actor (output: the rows' indices,
    turned into the distribution by ``dist_fn``) or critic (output: the values). Observations in the
    Batch are row indices, so the diagnostics can say which rows the first minibatch held."""

    def __init__(self, policy, obs, critic: bool):
        super().__init__()
        self.policy, self.critic = policy, critic
        self.obs = obs

    def forward(self, index, state=None, info=None):
        index = torch.as_tensor(index, dtype=torch.long).reshape(-1)
        if self.critic:
            return self.policy(self.obs[index])[1].flatten()
        return index.to(self.obs.dtype), state


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


def _joint(dist, actions):
    """Tianshou's dist_fn returns the joint distribution of an action (``Independent`` over its
    dimensions for a Gaussian): a per-dimension one is wrapped, as a Tianshou user would."""
    if actions.ndim > 1 and len(dist.event_shape) == 0:
        return torch.distributions.Independent(dist, 1)
    return dist


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    """One PPO._update_with_batch (epochs = ``repeat``, minibatches of ``minibatch_size`` from
    Tianshou's shuffled ``Batch.split``) on the stored batch, stepping the suite's optimizer through
    Tianshou's own ``Optimizer.step`` (zero_grad, backward, one global gradient-norm clip, step).

    Tianshou's PPO has no KL early stop: ``target_kl`` is not read and ``approx_kl`` stays empty."""
    n = len(obs)
    first = _FirstLogProb()
    actor = _SuiteHead(policy, obs, critic=False)
    actor_policy = ProbabilisticActorPolicy(
        actor=actor,
        dist_fn=lambda index: first.wrap(_joint(policy(obs[index.long()])[0], actions), index.long()),
        action_space=gym.spaces.Box(-1.0, 1.0, (1,)),
        action_scaling=False,
        action_bound_method=None,
    )
    algorithm = PPO(
        policy=actor_policy, critic=_SuiteHead(policy, obs, critic=True), optim=_GivenOptimizer(optimizer),
        eps_clip=config["clip_eps"], vf_coef=config["vf_coef"], ent_coef=config["ent_coef"],
        max_grad_norm=config["max_grad_norm"], advantage_normalization=bool(config["normalize_advantages"]),
    )
    batch = Batch(obs=np.arange(n), act=actions, logp_old=logp_old.detach(), adv=advantages.detach(),
                  returns=returns.detach(), v_s=values_old.detach(), info=Batch())
    minibatch = int(config["minibatch_size"])
    singleton = bool(config["normalize_advantages"]) and (minibatch == 1 or n == 1)
    with torch.enable_grad(), _nan_explained(singleton, "PPO normalised a one-sample minibatch: (A - mean) / (std + 1e-8) "
                                             "with the unbiased std of one element is NaN (ppo.py:184-186), so the loss "
                                             "and the step are NaN and the next minibatch's distribution has NaN parameters"):
        algorithm._update_with_batch(batch, batch_size=minibatch, repeat=int(config["epochs"]))
    ratios = (first.logp - logp_old.detach()[first.index]).exp()
    return {"ratios": ratios, "indices": first.index, "approx_kl": [], "epochs": int(config["epochs"])}


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

VARIANTS = ("dual_clip", "npg")

"""Built-in adapter ``sb3_contrib`` (also ``sb3-contrib``): sb3-contrib's TRPO (written against 2.9.2).

    pip install "rlspec[sb3-contrib]"
    rlspec check --candidate sb3-contrib

What each operation drives (paths in ``site-packages/sb3_contrib``):

- ``conjugate_gradient``: ``common.utils.conjugate_gradient_solver(matvec, b, max_iter, residual_tol)``,
  called directly. It starts from ``x0 = 1e-4 randn_like(b)`` drawn from torch's global RNG; the
  adapter draws it under ``torch.manual_seed(0)`` (and restores the RNG), so a call is reproducible.
- ``natural_step`` and ``line_search``: one real ``TRPO.train()``. Its step (``conjugate_gradient_solver``
  on the damped Hessian-vector product of the KL, ``beta = sqrt(2 target_kl / s.(F + damping I)s)``)
  and its backtracking line search are inline in ``train()`` (trpo.py:295-359), so the adapter gives
  ``train()`` a one-sample rollout and a controlled policy whose actor parameter is ``theta`` and
  whose distribution is scripted from the suite's inputs:

  * ``natural_step(grad, fvp, max_kl, cg_iters)``: log pi(theta) has value 0 and gradient ``grad``
    and the KL to the old policy is ``1/2 (theta - theta_0)' F (theta - theta_0)``, with F built
    column by column from ``fvp``; so ``train()``'s surrogate gradient is ``grad`` and its
    Hessian-vector product is ``(F + cg_damping I) v``. The step is read as the parameters of the
    first line-search trial minus ``theta_0``: ``beta s``, as ``train()`` computed it.
  * ``line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks)``: in coordinates
    ``z`` with ``theta = x0 + scale z`` (``scale = |fullstep| / sqrt(2 max_kl)``), log pi has value
    ``surrogate(theta) - surrogate(x0)`` and gradient ``fullstep / scale``, and the KL has value
    ``kl(theta)`` and Hessian ``I`` (``cg_damping`` 0 here), so the step ``train()`` computes is
    exactly ``fullstep`` (CG's random start cancels in its first iterate) and every trial is judged
    by the suite's ``surrogate`` (through the ratio exp(log pi - log pi_old), monotone in it) and
    ``kl``. The returned ``x`` is the parameters after ``train()``: the accepted trial, or ``x0``.

- ``trpo_update(policy, params, actions, advantages, ...)``: one real ``TRPO.train()`` whose actor
  is the suite's ``policy(theta)`` (a torch distribution over the batch) at the parameter vector
  ``theta``, on a rollout buffer holding log pi_old and the advantages, with sb3-contrib's default
  ``normalize_advantage=True`` (train() standardises them over the whole buffer, trpo.py:274-275,
  declared ``trpo_advantage_normalization``); returns ``theta`` after the line search. Here the line
  search's KL is sb3-contrib's own: KL(new || old).
- ``fisher_vector_product(policy, params, v)``: ``TRPO.hessian_vector_product`` (the Hessian of
  sb3-contrib's KL plus ``cg_damping`` v), tapped at its first call inside such a ``train()``.

Conventions: the backtracking factor is 0.8 (``line_search_shrinking_factor``), a trial is accepted
iff ``kl < max_kl`` and the surrogate strictly improves (no expected-improvement test), the
damping 0.1 is part of the step normalisation, and the KL the line search compares is
KL(new || old) (``kl_divergence(distribution, old_distribution)``, the reverse of the TRPO
paper's); with the suite's ``kl`` callable that direction is the suite's, so the adapter's own tests
check sb3-contrib's direction on a real Gaussian policy. Deviations: ``sb3_contrib.xfail``.
"""

from __future__ import annotations

import contextlib
import random
import warnings

import gymnasium as gym
import numpy as np
import sb3_contrib
import torch as th
from gymnasium import spaces
from sb3_contrib import TRPO
from sb3_contrib.common.utils import conjugate_gradient_solver
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.vec_env import DummyVecEnv

WRITTEN_AGAINST = "2.9.2"
# The releases this adapter drives (``rlspec matrix --releases`` reads it without importing the library; docs/releases.md).
RELEASES = {
    "distribution": "sb3-contrib",
    "range": ">=2.0.0",
    "why": "2.0.0 is sb3-contrib's first release on Gymnasium and SB3 2.0 (the TRPO this adapter drives); 1.x is on gym",
    "with": {"stable-baselines3": "=={major}.{minor}.*"},  # released in step with SB3
}
RLSPEC_VERSION = f"sb3-contrib {sb3_contrib.__version__}"
RLSPEC_ARRAY = "numpy"  # trpo_update and fisher_vector_product receive torch from the suite
RLSPEC_CONVENTIONS = {
    # cg_initial_guess: "1e-4 randn (torch's global RNG; seeded 0 by the adapter)"
    # cg_residual_tol: "squared" (stops when r.r < residual_tol)
    # TRPO.train() calls conjugate_gradient_solver with its default residual_tol=1e-10 (common/utils.py): the
    # natural step is only as accurate as |r| <= 1e-5 allows
    "natural_step_cg_tol": 1e-10,
    "damping": 0.1,  # cg_damping, added to the Fisher-vector product, also inside the step normalisation
    "backtrack_factor": 0.8,  # line_search_shrinking_factor
    # line_search_kl: "strict" (accept iff kl < max_kl (not <=) and surrogate(x) > surrogate(x0))
    # line_search_expected_improvement: None (no accept-ratio test)
    # kl_direction: "KL(new || old)" (kl_divergence(distribution, old_distribution) in TRPO.train())
    # train(): (A - mean) / (std + 1e-8) over the whole buffer, once (normalize_advantage=True, the default)
    "trpo_advantage_normalization": "batch",
}


@contextlib.contextmanager
def _library_call():
    """Seed torch's and numpy's global RNGs (CG's random start, the buffer's shuffle) and restore them."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    with th.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        th.default_generator.manual_seed(0)  # the CPU generator only (manual_seed also walks CUDA)
        np.random.seed(0)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)


def _vector(x) -> th.Tensor:
    return th.as_tensor(np.asarray(x, dtype=np.float64)).reshape(-1).clone()


def _numpy_callable(function):
    """The suite's callable (numpy in, array-like out) as a torch float64 function."""
    return lambda v: _vector(function(v.detach().numpy().copy()))


# ---------------------------------------------------------------------------------------------
# conjugate gradient


def conjugate_gradient(matvec, b, iters, tol):
    with _library_call():
        x = conjugate_gradient_solver(_numpy_callable(matvec), _vector(b), max_iter=int(iters), residual_tol=float(tol))
    return x.detach().numpy()


# ---------------------------------------------------------------------------------------------
# TRPO.train() with a scripted policy


class _CarriesKL(th.distributions.Distribution):
    """A torch-level distribution that only carries a KL value, for SB3's ``kl_divergence``."""

    arg_constraints: dict = {}

    def __init__(self, kl: th.Tensor):
        self.kl = kl
        super().__init__(batch_shape=th.Size(), validate_args=False)


@th.distributions.kl.register_kl(_CarriesKL, _CarriesKL)
def _carried_kl(p: _CarriesKL, q: _CarriesKL) -> th.Tensor:
    return p.kl  # the KL of the new policy (p, the first argument) to the old one


class _Scripted(Distribution):
    """SB3's Distribution interface over a scripted log-probability and KL (see the module docstring)."""

    def __init__(self, log_prob: th.Tensor, kl: th.Tensor):
        super().__init__()
        self._log_prob = log_prob
        self.distribution = _CarriesKL(kl)

    def log_prob(self, actions):
        return self._log_prob.reshape(1).expand(actions.shape[0])

    def entropy(self):
        return None

    def _unused(self, *args, **kwargs):  # pragma: no cover - train() never samples
        raise NotImplementedError("a scripted distribution is not sampled")

    proba_distribution_net = proba_distribution = sample = mode = actions_from_params = log_prob_from_params = _unused


class _ScriptedPolicy(ActorCriticPolicy):
    """The actor is one parameter vector ``theta`` (the only parameter with a KL gradient);
    ``get_distribution`` evaluates the script at ``theta`` and records every ``theta`` it sees."""

    script = None

    def get_distribution(self, obs):
        self.seen.append((th.is_grad_enabled(), self.theta.detach().clone()))
        log_prob, kl = self.script(self.theta)
        return _Scripted(log_prob, kl)


class _OneSample(gym.Env):
    observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):  # pragma: no cover - the buffer is filled directly
        raise RuntimeError("not stepped")


def _train(theta0: th.Tensor, script, *, max_kl: float, cg_iters: int, damping: float, backtrack: float, max_iter: int):
    """One TRPO.train() on a one-sample rollout (advantage 1, log pi_old 0); returns the policy."""
    with _library_call():
        model = TRPO(
            _ScriptedPolicy, DummyVecEnv([_OneSample]), n_steps=1, batch_size=1, normalize_advantage=False,  # one sample: the operations take the gradient or surrogate itself
            target_kl=float(max_kl), cg_max_steps=int(cg_iters), cg_damping=float(damping),
            line_search_shrinking_factor=float(backtrack), line_search_max_iter=int(max_iter), n_critic_updates=0,
            device="cpu", policy_kwargs={"net_arch": []},
        )
        model.set_logger(Logger(folder=None, output_formats=[]))
        policy = model.policy
        policy.theta = th.nn.Parameter(theta0.clone())
        policy.script, policy.seen = script, []
        buffer = model.rollout_buffer
        buffer.add(np.zeros((1, 1), np.float32), np.zeros((1, 1)), np.zeros(1), np.zeros(1), th.zeros(1), th.zeros(1))
        buffer.advantages[:] = 1.0
        model.train()
    return policy


def _trials(policy) -> list[th.Tensor]:
    """The parameters of each line-search trial: every no-grad evaluation after the gradient's."""
    first_grad = next(i for i, (grad, _) in enumerate(policy.seen) if grad)
    return [theta for grad, theta in policy.seen[first_grad + 1:] if not grad]


# ---------------------------------------------------------------------------------------------
# TRPO.train() with the suite's policy: trpo_update and fisher_vector_product


class _SuiteDistribution(Distribution):
    """SB3's Distribution interface over the suite's torch distribution (batch in the suite's order).

    ``train()`` takes the buffer's samples shuffled; ``log_prob`` answers for those rows with the
    suite's own (unrounded) actions, and ``.distribution`` is the suite's, so SB3's
    ``kl_divergence(new, old)`` is torch's per-sample KL, whose mean does not depend on the order.
    """

    def __init__(self, distribution, rows, actions):
        super().__init__()
        self.distribution, self._rows, self._actions = distribution, rows, actions

    def log_prob(self, actions):
        return self.distribution.log_prob(self._actions)[self._rows]

    def entropy(self):
        return self.distribution.entropy()[self._rows]

    _unused = _Scripted._unused
    proba_distribution_net = proba_distribution = sample = mode = actions_from_params = log_prob_from_params = _unused


class _SuitePolicy(ActorCriticPolicy):
    """The actor is the suite's ``policy(theta)`` at the parameter vector ``theta``; the observation
    of buffer sample i is [i]."""

    suite_policy = None

    def get_distribution(self, obs):
        return _SuiteDistribution(self.suite_policy(self.theta), obs[:, 0].long(), self.suite_actions)


def _suite_train(policy, params, actions, advantages, *, max_kl, cg_iters, max_backtracks, tap=None,
                 normalize_advantage=True):
    """One TRPO.train() with sb3-contrib's defaults (damping 0.1, backtracking 0.8, normalize_advantage)
    on the suite's batch; ``tap(model)`` may wrap the model's methods first. Returns the actor's
    parameters after."""
    params = params.detach()
    actions = actions.detach()
    n = int(policy(params).batch_shape[0])
    with _library_call():
        model = TRPO(
            _SuitePolicy, DummyVecEnv([_OneSample]), n_steps=n, batch_size=n, normalize_advantage=normalize_advantage,
            target_kl=float(max_kl), cg_max_steps=int(cg_iters), cg_damping=RLSPEC_CONVENTIONS["damping"],
            line_search_shrinking_factor=RLSPEC_CONVENTIONS["backtrack_factor"], line_search_max_iter=int(max_backtracks),
            n_critic_updates=0, device="cpu", policy_kwargs={"net_arch": []},
        )
        model.set_logger(Logger(folder=None, output_formats=[]))
        model.policy.theta = th.nn.Parameter(params.clone())
        model.policy.suite_policy, model.policy.suite_actions = policy, actions
        with th.no_grad():
            logp_old = policy(params).log_prob(actions)  # log pi_old, stored as at collection time
        buffer = model.rollout_buffer
        for i in range(n):
            buffer.add(np.array([[i]], dtype=np.float32), np.zeros((1, 1)), np.zeros(1), np.zeros(1), th.zeros(1),
                       logp_old[i].reshape(1))
        buffer.advantages[:, 0] = np.asarray(th.as_tensor(advantages).detach().double())
        if tap is not None:
            tap(model)
        model.train()
    return model.policy.theta.detach().clone()


def trpo_update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks):
    """TRPO.train() with its defaults (normalize_advantage=True: the advantages are standardised first).

    The rollout buffer stores log pi_old and the advantages as float32, so the result carries
    float32 rounding (the per-sample ratios at theta_old are exp(log pi - fl32(log pi)), not 1); it
    is returned as float32 to be judged at that precision."""
    new = _suite_train(policy, params, actions, advantages, max_kl=max_kl, cg_iters=cg_iters,
                       max_backtracks=max_backtracks)
    return new.to(th.float32)


def fisher_vector_product(policy, params, v):
    """(F + 0.1 I) v from TRPO.hessian_vector_product, tapped at its first call inside train()."""
    found = []

    def tap(model):
        original = model.hessian_vector_product

        def tapped(actor_params, grad_kl, vector, retain_graph=True):
            if not found:
                found.append(original(actor_params, grad_kl, v.detach().to(grad_kl.dtype), retain_graph=True).detach())
            return original(actor_params, grad_kl, vector, retain_graph=retain_graph)

        model.hessian_vector_product = tapped

    with _library_call():
        with th.no_grad():
            actions = policy(params.detach()).sample()  # any actions: only the KL's Hessian is read
    # the advantages do not enter the Hessian of the KL; standardising them is off for this tap only, so a
    # one-sample batch (std 0/0) cannot stop train() before its first product
    _suite_train(policy, params, actions, th.ones(len(actions)), max_kl=0.01, cg_iters=1, max_backtracks=1, tap=tap,
                 normalize_advantage=False)
    return found[0]


def natural_step(grad, fvp, max_kl, cg_iters):
    g = _vector(grad)
    d = len(g)
    apply_fvp = _numpy_callable(fvp)
    F = th.stack([apply_fvp(th.eye(d, dtype=th.float64)[i]) for i in range(d)], dim=1)  # column i = F e_i
    theta0 = th.zeros(d, dtype=th.float64)

    def script(theta):
        moved = theta - theta0
        return (theta - theta.detach()) @ g, 0.5 * moved @ (F @ moved)

    policy = _train(theta0, script, max_kl=max_kl, cg_iters=cg_iters, damping=RLSPEC_CONVENTIONS["damping"],
                    backtrack=RLSPEC_CONVENTIONS["backtrack_factor"], max_iter=1)
    return (_trials(policy)[0] - theta0).numpy()


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks):
    x0, f = _vector(x0), _vector(fullstep)
    # train() runs in coordinates z with theta = x0 + scale z, scaled so that |fullstep in z|^2 =
    # 2 max_kl: then the KL curvature that makes train()'s step equal fullstep is exactly 1, the
    # Hessian-vector product is the vector itself, and CG's first iterate cancels its random start
    # exactly (x = x0 + (g - x0)), so directions fullstep does not move in stay exactly at x0.
    norm = float(f.norm())
    scale = norm / (2.0 * float(max_kl)) ** 0.5 if norm > 0 else 1.0
    g = f / scale  # fullstep in z
    base = float(surrogate(x0.numpy().copy()))
    at = lambda z: x0 + scale * z

    def script(z):
        here = z.detach()
        theta = at(here).numpy().copy()
        log_prob = th.tensor(float(surrogate(theta)) - base, dtype=th.float64) + (z - here) @ g
        quadratic = lambda w: 0.5 * (w @ w)
        divergence = th.tensor(float(kl(theta)), dtype=th.float64) + quadratic(z) - quadratic(here)
        return log_prob, divergence

    policy = _train(th.zeros_like(x0), script, max_kl=max_kl, cg_iters=10, damping=0.0,
                    backtrack=RLSPEC_CONVENTIONS["backtrack_factor"], max_iter=max_backtracks)
    z = policy.theta.detach()
    return x0.numpy().copy() if not z.any() else at(z).numpy()

"""The ``sb3_contrib`` adapter against sb3-contrib 2.9's TRPO: its verdicts (tests/adapters/expected/
sb3_contrib.toml) and the facts behind them: conjugate gradient, step scaling, line search, KL direction.

Skipped when sb3-contrib is not installed, unless RLSPEC_REQUIRE_ADAPTERS=1 (.ci/adapters), where
a missing library is an error.
"""

import os

import numpy as np
import pytest

if os.environ.get("RLSPEC_REQUIRE_ADAPTERS"):
    import sb3_contrib as _sb3_contrib  # noqa: F401 - .ci/adapters: the library must be there
else:
    pytest.importorskip("sb3_contrib")

import torch  # noqa: E402

from _verdicts import verdict_tests  # noqa: E402

from rlspec.checks import load# noqa: E402
from rlspec.checks.adapters import sb3_contrib  # noqa: E402

test_verdict, test_unlisted_clauses, test_table_names_every_candidate = verdict_tests("sb3_contrib")


def test_version_and_name():
    assert sb3_contrib.RLSPEC_VERSION.startswith("sb3-contrib 2.9."), sb3_contrib.RLSPEC_VERSION
    assert load("sb3-contrib").operations.keys() == load("sb3_contrib").operations.keys()


def _spd(n, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, n))
    return m @ m.T + np.eye(n), rng.normal(size=n)


def test_conjugate_gradient_p9():
    A, b = _spd(10)
    x = sb3_contrib.conjugate_gradient(lambda v: A @ v, b, 10, 1e-10)
    assert np.linalg.norm(A @ x - b) / np.linalg.norm(b) < 1e-8


def test_step_is_normalised_with_the_damping():
    """beta^2 s'(F + 0.1 I)s / 2 = max_kl (the damping inside the normalisation), so the undamped
    quadratic form is below max_kl."""
    F, g = _spd(5, seed=1)
    step = sb3_contrib.natural_step(g, lambda v: F @ v, 0.01, 10)
    damped = F + 0.1 * np.eye(5)
    assert 0.5 * step @ damped @ step == pytest.approx(0.01, rel=1e-9)
    assert 0.5 * step @ F @ step < 0.01
    assert np.allclose(step / np.linalg.norm(step), np.linalg.solve(damped, g) / np.linalg.norm(np.linalg.solve(damped, g)))


def test_line_search_backtracks_by_0_8_and_needs_a_strict_kl():
    x0, full = np.zeros(2), np.array([1.0, 1.0])
    improving = lambda x: float(x.sum())
    quadratic = lambda x: 0.5 * float(x @ x)
    # trials 0.8^k (1, 1); KL 0.8^(2k): the first below 0.05 is k = 7
    assert sb3_contrib.line_search(improving, quadratic, x0, full, 0.05, 10) == pytest.approx([0.8**7] * 2)
    # a KL of exactly max_kl at the full step is rejected (kl < max_kl, strictly); the next trial is taken
    at_the_bound = lambda x: 1.0 if x[0] > 0.9 else 0.0
    assert sb3_contrib.line_search(improving, at_the_bound, x0, full, 1.0, 10) == pytest.approx([0.8, 0.8])
    # nothing improves: the parameters come back to x0
    assert sb3_contrib.line_search(lambda x: -float(x.sum()), quadratic, x0, full, 10.0, 5).tolist() == [0.0, 0.0]


def test_line_search_kl_is_new_to_old():
    """On a real Gaussian MlpPolicy, TRPO.train() calls kl_divergence(distribution, old_distribution):
    the first argument is the differentiable new policy, so it computes KL(new || old), the reverse
    of the TRPO paper's KL(old || new)."""
    import gymnasium as gym
    from sb3_contrib import TRPO
    from sb3_contrib.trpo import trpo as module
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import DummyVecEnv

    class Box(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):  # pragma: no cover
            raise RuntimeError

    torch.manual_seed(0)
    model = TRPO("MlpPolicy", DummyVecEnv([Box]), n_steps=8, batch_size=8, n_critic_updates=0, device="cpu")
    model.set_logger(Logger(None, []))
    rng = np.random.default_rng(0)
    for _ in range(8):
        obs = rng.normal(size=(1, 2)).astype(np.float32)
        action = rng.normal(size=(1, 2)).astype(np.float32)
        with torch.no_grad():
            _, log_prob, _ = model.policy.evaluate_actions(torch.as_tensor(obs), torch.as_tensor(action))
        model.rollout_buffer.add(obs, action, np.zeros(1), np.zeros(1), torch.zeros(1), log_prob)
    model.rollout_buffer.advantages[:] = rng.normal(size=(8, 1))
    calls = []
    original = module.kl_divergence
    # (SB3 reuses one distribution object per policy, so look at the arguments when they are passed)
    grads = lambda p, q: (p.distribution.loc.requires_grad, q.distribution.loc.requires_grad)
    module.kl_divergence = lambda p, q: calls.append(grads(p, q)) or original(p, q)
    try:
        model.train()
    finally:
        module.kl_divergence = original
    first_is_new, second_is_new = calls[0]
    assert first_is_new and not second_is_new


def _policy(kind, seed=0):
    from rlspec.reference import trpo as ref

    rng = np.random.default_rng(seed)
    features = rng.normal(size=(6, 3))
    policy = ref.linear_diag_gaussian(features, 2) if kind == "gaussian" else ref.linear_categorical(features, 3)
    params = torch.tensor(rng.normal(size=policy.n_params) * 0.1)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        actions = policy(params).sample()
    return policy, params, actions, torch.tensor(rng.normal(size=6)), torch.tensor(rng.normal(size=policy.n_params))


@pytest.mark.parametrize("kind", ["gaussian", "categorical"])
def test_trpo_update_and_fisher_vector_product_drive_train(kind):
    """On a step the first trial accepts (where the KL directions agree), train() matches the
    TRPO rule on standardised advantages (normalize_advantage=True, its default) with damping 0.1 (to
    CG's accuracy from sb3-contrib's random start, and the float32 buffer); its Hessian-vector product
    is (F + 0.1 I) v."""
    from rlspec.reference import trpo as ref

    policy, params, actions, advantages, v = _policy(kind)
    assert torch.allclose(sb3_contrib.fisher_vector_product(policy, params, v),
                          ref.fisher_vector_product(policy, params, v, damping=0.1), atol=1e-12)
    new = sb3_contrib.trpo_update(policy, params, actions, advantages, 0.01, 10, 10)
    standardised = (advantages - advantages.mean()) / advantages.std()  # train()'s, up to its + 1e-8
    expected = ref.trpo_update(policy, params, actions, standardised, 0.01, 10, 10, damping=0.1, backtrack_factor=0.8)
    assert new.dtype == torch.float32 and torch.allclose(new.double(), expected, rtol=1e-3, atol=1e-5)

"""The ``tianshou`` adapter against Tianshou 2.0.1: its verdicts (tests/adapters/expected/tianshou.toml,
for the defaults and the variants) and the library facts behind them.

Skipped when tianshou is not installed, unless RLSPEC_REQUIRE_ADAPTERS=1 (.ci/adapters), where a
missing library is an error.
"""

import os

import numpy as np
import pytest

if os.environ.get("RLSPEC_REQUIRE_ADAPTERS"):
    import tianshou  # noqa: F401 - .ci/adapters: the library must be there
else:
    pytest.importorskip("tianshou")

import torch  # noqa: E402
from _verdicts import verdict_tests  # noqa: E402

from rlspec.checks import load, run_conformance  # noqa: E402
from rlspec.checks.adapters import tianshou as adapter  # noqa: E402

test_verdict, test_unlisted_clauses, test_table_names_every_candidate = verdict_tests("tianshou")


def test_version_is_the_one_the_adapter_was_written_against():
    assert adapter.RLSPEC_VERSION == "tianshou 2.0.1", adapter.RLSPEC_VERSION


def test_loads_by_bare_name_with_its_declarations():
    candidate = load("tianshou")
    assert candidate.precision == "float32" and candidate.conventions["advantage_normalization"] == "minibatch"
    assert candidate.conventions["trpo_advantage_normalization"] == "batch"
    assert load("tianshou:dual_clip").conventions["dual_clip"] == 3.0


def test_dual_clip_undeclared_is_caught():
    """The dual clip judged as if undeclared: A = -2, r = 10 has gradient 0 instead of +20."""
    undeclared = load("tianshou:dual_clip")
    undeclared.conventions = {**undeclared.conventions, "dual_clip": None}
    run = run_conformance(undeclared, clauses="PPO-DUAL-CLIP", profile="quick", seed=0)
    assert run["PPO-DUAL-CLIP"].status == "fail"


def test_one_sample_minibatch_update_is_nan_and_the_error_says_why():
    """PPO normalises each minibatch with (A - mean) / (std + 1e-8): one sample has std NaN, the step is
    NaN, and the next minibatch's Categorical raises (the matrix's two PPO-UPDATE errors)."""
    from rlspec.checks.clauses.ppo import BASE_CONFIG, UpdateCase

    arguments = UpdateCase("categorical", n=2, seed=1).arguments("float64", config={**BASE_CONFIG, "minibatch_size": 1})
    with pytest.raises(ValueError, match="one-sample minibatch.*invalid values"):
        adapter.ppo_update(**arguments)
    arguments = UpdateCase("categorical", n=8, seed=1).arguments("float64", config={**BASE_CONFIG, "minibatch_size": 4})
    assert adapter.ppo_update(**arguments)["ratios"].tolist() == pytest.approx([1.0] * 4)


def test_npg_and_trpo_standardise_without_an_epsilon():
    """NPG._preprocess_batch: (A - mean) / std with no epsilon. Constant advantages are 0/0 = NaN, and
    TRPO's line search then evaluates NaN parameters."""
    from rlspec.reference import trpo as ref

    policy = ref.linear_categorical(np.array([[1.0, 0.5], [-0.5, 1.0], [0.25, -1.0]]), 3)
    theta = torch.tensor([0.3, -0.2, 0.5, 0.1], dtype=torch.float64)
    actions = torch.tensor([0, 2, 1])
    with pytest.raises(ValueError, match="constant advantages"):
        adapter.trpo_update(policy, theta, actions, torch.full((3,), 0.75, dtype=torch.float64), 0.01, 10, 10)
    moved = adapter.trpo_update(policy, theta, actions, torch.tensor([1.0, -0.5, 0.75], dtype=torch.float64), 0.01, 10, 10)
    assert torch.all(torch.isfinite(moved)) and not torch.equal(moved, theta)


def test_sac_squashing_correction_is_the_epsilon_form():
    """correct_log_prob_gaussian_tanh subtracts log(1 - tanh(u)^2 + float32 eps): -35.04 at u = 10,
    where the exact log-density is -32.31 (docs/bugs-found.md)."""
    import math

    u = torch.tensor([[1.0], [10.0]], dtype=torch.float64)
    got = adapter.tanh_gaussian_log_prob(torch.zeros_like(u), torch.zeros_like(u), u)
    exact = [-0.5 * math.log(2 * math.pi) - x * x / 2 - 2 * (math.log(2) - x - math.log1p(math.exp(-2 * x))) for x in (1.0, 10.0)]
    assert got[0].item() == pytest.approx(exact[0], abs=1e-6)
    assert got[1].item() == pytest.approx(-35.04, abs=0.01) and exact[1] == pytest.approx(-32.31, abs=0.01)


# ---------------------------------------------------------------------------------------------
# the facts behind the verdicts, on the GAE known answers

P1 = dict(rewards=np.ones(4), values=np.full(4, 0.5), next_values=np.array([0.5, 0.5, 0.5, 2.0]),
          terminated=np.array([False, True, False, False]), truncated=np.zeros(4, bool), gamma=0.5, lam=0.5)
P2 = {**P1, "next_values": np.array([0.5, 3.0, 0.5, 2.0]), "terminated": np.zeros(4, bool),
      "truncated": np.array([False, True, False, False])}


def test_gae_known_answers_through_the_buffer():
    assert adapter.gae(**P1)[0].tolist() == [0.875, 0.5, 1.125, 1.5]
    assert adapter.gae(**P2)[0].tolist() == [1.25, 2.0, 1.125, 1.5]
    both = {k: np.stack([P1[k], P2[k]], axis=1) if isinstance(P1[k], np.ndarray) else P1[k] for k in P1}
    advantages, returns = adapter.gae(**both)  # a VectorReplayBuffer with two sub-buffers
    assert advantages.T.tolist() == [[0.875, 0.5, 1.125, 1.5], [1.25, 2.0, 1.125, 1.5]]
    assert returns[:, 1].tolist() == [1.75, 2.5, 1.625, 2.0]


def test_default_v_s_rolls_the_next_values():
    """compute_episodic_return's v_s=None default is np.roll of the masked v_s_: wrong at episode
    starts (bug B8: [-0.625, 0.5, 1.625, 1.5] on P1); the adapter always passes v_s."""
    from tianshou.algorithm.algorithm_base import Algorithm

    buffer, batch, indices = adapter._fill(P1["rewards"][:, None], P1["terminated"][:, None], P1["truncated"][:, None])
    _, advantages = Algorithm.compute_episodic_return(batch, buffer, indices, v_s_=P1["next_values"], gamma=0.5, gae_lambda=0.5)
    assert advantages.tolist() == [-0.625, 0.5, 1.625, 1.5]


def test_monte_carlo_return_without_bootstrap():
    assert adapter.rewards_to_go(np.array([1.0, 2.0, 3.0]), 0.5).tolist() == [2.75, 3.5, 3.0]


def test_clip_gradient_table_p5():
    for A, r, expected in [(2, 0.5, -1.0), (2, 1.0, -2.0), (2, 1.5, 0.0), (-2, 0.5, 0.0), (-2, 1.0, 2.0), (-2, 1.5, 3.0)]:
        logp_new = torch.tensor([0.0], dtype=torch.float64, requires_grad=True)
        logp_old = torch.tensor([-np.log(r)], dtype=torch.float64)
        loss = adapter.ppo_clip_loss(logp_new, logp_old, torch.tensor([float(A)], dtype=torch.float64), 0.2)
        (grad,) = torch.autograd.grad(loss, logp_new)
        assert grad.item() == pytest.approx(expected, abs=1e-6), (A, r)


def test_dual_clip_p5():
    """dual_clip = 3: A = -2, r = 5 -> loss 6, gradient 0."""
    logp_new = torch.tensor([np.log(5.0)], dtype=torch.float64, requires_grad=True)
    loss = adapter.dual_clip.ppo_clip_loss(logp_new, torch.zeros(1, dtype=torch.float64),
                                           torch.tensor([-2.0], dtype=torch.float64), 0.2)
    assert loss.item() == pytest.approx(6.0) and torch.autograd.grad(loss, logp_new)[0].item() == 0.0


def test_ratio_is_float32_value_loss_and_normalisation_p6_p8_p10():
    logp_new = torch.tensor([-1000.0], dtype=torch.float64, requires_grad=True)
    loss = adapter.ppo_clip_loss(logp_new, torch.tensor([-1000.1], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64), 0.5)
    assert loss.item() == -float(np.float32(np.exp(0.1)))  # the ratio goes through .float()
    V = torch.tensor([0.0, 0.0], dtype=torch.float64, requires_grad=True)
    R, V_old = torch.tensor([0.5, 3.0], dtype=torch.float64), torch.tensor([0.3, -1.0], dtype=torch.float64)
    assert adapter.ppo_value_loss(V, R).item() == pytest.approx(4.625)  # no 0.5 on the value loss
    assert adapter.ppo_value_loss(V, R, V_old, 0.2).item() == pytest.approx(7.345)
    assert adapter.normalize_advantages(np.array([1.0, 2.0, 3.0, 4.0])).tolist() == pytest.approx(
        [-1.161895, -0.387298, 0.387298, 1.161895], abs=1e-6)
    assert adapter.normalize_advantages(np.array([0.0, 1e-7])).tolist() == pytest.approx([-0.619497, 0.619497], abs=1e-6)
    assert np.isnan(adapter.normalize_advantages(np.array([3.0]))).all()


def test_trpo_facts():
    """Tianshou's MVP adds 0.1 v; its step is scaled with the damped matrix, so 1/2 dW' F dW < max_kl; CG stops on r'r < residual_tol."""
    from rlspec.reference import trpo as ref

    features = np.array([[1.0, 0.5], [0.2, -1.0], [0.3, 0.3]])
    policy = ref.linear_diag_gaussian(features, 1)  # theta = (w1, w2, log_std): the mean is linear
    theta = torch.zeros(3, dtype=torch.float64)
    F = torch.stack([adapter.fisher_vector_product(policy, theta, e) for e in torch.eye(3, dtype=torch.float64)])
    F_undamped = F - 0.1 * torch.eye(3, dtype=torch.float64)
    X = torch.as_tensor(features)
    assert torch.allclose(F_undamped[:2, :2], X.T @ X / 3, atol=1e-12)  # unit std: F = X'X / B for the mean
    actions = torch.tensor([[0.3], [-0.2], [0.5]], dtype=torch.float64)
    # the advantages are standardised first; the step's size is set by max_kl whatever their scale
    new = adapter.trpo_update(policy, theta, actions, torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64), 0.01, 10, 10)
    step = new - theta
    assert float(0.5 * step @ F @ step) == pytest.approx(0.01, rel=1e-5)  # the damped quadratic meets max_kl
    assert float(0.5 * step @ F_undamped @ step) < 0.01
    A = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    x = adapter.conjugate_gradient(lambda v: A @ v, torch.tensor([1.0, 2.0], dtype=torch.float64), 2, 1e-20)
    assert torch.allclose(A @ x, torch.tensor([1.0, 2.0], dtype=torch.float64), atol=1e-12)


def test_npg_step_is_half_the_damped_natural_direction():
    F = np.diag([1.0, 100.0])
    g = np.array([1.0, 1.0])
    step = adapter.npg.natural_step(g, lambda v: F @ np.asarray(v), 0.01, 20)
    assert step == pytest.approx(0.5 * np.linalg.solve(F + 0.1 * np.eye(2), g), rel=1e-6)

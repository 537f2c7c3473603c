"""The ``tianshou`` adapter against Tianshou 2.0.1: its verdicts clause by clause, the dual-clip
variant, and the facts the adapter relies on.

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

from rlspec.checks import load, run_conformance  # noqa: E402
from rlspec.checks.adapters import tianshou as adapter  # noqa: E402

PPO_CLIP_CLAUSES = ("PPO-RATIO-LOG-SPACE", "PPO-FIRST-STEP-VANILLA-GRADIENT", "PPO-CLIP-LOSS-VALUE",
                    "PPO-CLIP-GRADIENT-TABLE", "PPO-PESSIMISTIC-BOUND", "PPO-WRONG-WAY-GRADIENT-LIVE",
                    "PPO-CLIP-BOUNDARY", "PPO-DUAL-CLIP")

# What Tianshou does, clause by clause (quick profile, seed 0, float64). Every clause of an
# operation the adapter provides is listed; the rest must be not-provided.
EXPECTED = {
    **{clause: "pass" for clause in (
        "GAE-SEED-EXAMPLE", "GAE-SEED-EXAMPLE-TRUNCATED", "GAE-TD-ERROR-AT-LAMBDA-0", "GAE-MONTE-CARLO-AT-LAMBDA-1",
        "GAE-LAMBDA-MIXTURE", "GAE-BACKWARD-RECURSION", "GAE-TERMINAL-NO-BOOTSTRAP", "GAE-TRUNCATION-BOOTSTRAP",
        "GAE-NO-LEAK-ACROSS-BOUNDARY", "GAE-ROLLOUT-END-BOOTSTRAP", "GAE-COLUMNS-INDEPENDENT",
        "GAE-RETURNS-EQUAL-ADVANTAGES-PLUS-VALUES", "GAE-LINEARITY", "GAE-FLOAT32-LONG-ROLLOUT",
        "GAE-INPUTS-NOT-MUTATED", "RETURNS-REWARD-TO-GO",
        "GRID-GAE-EXPECTATION-EXACT-CRITIC", "GRID-GAE-EXPECTATION-CLOSED-FORM", "GRID-GAE-LAMBDA-ONE-CRITIC-CANCELS",
        "GRID-PERFORMANCE-DIFFERENCE",
        *PPO_CLIP_CLAUSES, "PPO-VALUE-LOSS", "PPO-VALUE-LOSS-CLIPPED", "PPO-ADVANTAGE-NORMALISATION",
        "PPO-ENTROPY-BONUS-SIGN",
        # under the declared damping 0.1, backtrack factor 0.8 and strict kl < max_kl
        "TRPO-CG-SOLVES-SPD", "TRPO-FVP-EQUALS-FISHER", "TRPO-LINE-SEARCH-KL-DIRECTION", "TRPO-UPDATE-TRUST-REGION",
    )},
    # (A - mean) / (std + 1e-8) with torch's unbiased std: a one-sample minibatch is 0 / NaN = NaN
    # (bug C1). A defect, not a declared choice: it stays red.
    "PPO-ADVANTAGE-NORMALISATION-DEGENERATE": "fail",
    # PPO has no target_kl: declared in tianshou.xfail
    "PPO-UPDATE-KL-EARLY-STOP": "xfail",
    "PPO-UPDATE-FIRST-STEP-GRADIENT": "pass",
}
# The same NaN inside a whole update: a drawn minibatch of one sample (n = 2 or 3) turns the
# parameters into NaN, and the next forward raises. Where the draw has no such minibatch: pass.
NAN_MINIBATCH = ("PPO-UPDATE-FIRST-RATIOS-ONE", "PPO-UPDATE-STORED-LOGP-OLD")
PROVIDED = {"gae", "rewards_to_go", "ppo_clip_loss", "ppo_value_loss", "normalize_advantages", "ppo_entropy_loss",
            "ppo_update", "conjugate_gradient", "fisher_vector_product", "trpo_update"}


@pytest.fixture(scope="module")
def run():
    return run_conformance("tianshou", profile="quick", seed=0)


def test_version_is_the_one_the_adapter_was_written_against():
    assert adapter.RLSPEC_VERSION == "tianshou 2.0.1", adapter.RLSPEC_VERSION


def test_loads_by_bare_name_with_its_declarations():
    candidate = load("tianshou")
    assert set(candidate.operations) == PROVIDED
    assert candidate.precision == "float32" and candidate.conventions["advantage_normalization"] == "minibatch"
    assert load("tianshou:dual_clip").conventions["dual_clip"] == 3.0


@pytest.mark.parametrize("clause", sorted(EXPECTED))
def test_verdict(run, clause):
    if clause not in {r.id for r in run.results}:
        pytest.skip(f"{clause} is not in this catalogue (its chapter has not landed)")
    result = run[clause]
    assert result.status == EXPECTED[clause], f"{clause}: {result.status}: {result.message}"


@pytest.mark.parametrize("clause", NAN_MINIBATCH)
def test_update_verdict_is_pass_unless_a_one_sample_minibatch_was_drawn(run, clause):
    result = run[clause]
    assert result.status == "pass" or (result.status == "error" and "invalid values" in result.message), result.message


def test_one_sample_minibatch_update_is_nan():
    from rlspec.checks.clauses.ppo import BASE_CONFIG, UpdateCase

    arguments = UpdateCase("categorical", n=2, seed=1).arguments("float64", config={**BASE_CONFIG, "minibatch_size": 1})
    with pytest.raises(ValueError, match="invalid values"):
        adapter.ppo_update(**arguments)
    arguments = UpdateCase("categorical", n=8, seed=1).arguments("float64", config={**BASE_CONFIG, "minibatch_size": 4})
    assert adapter.ppo_update(**arguments)["ratios"].tolist() == pytest.approx([1.0] * 4)


def test_every_other_clause_is_not_provided_or_passes(run):
    """A clause not in EXPECTED (a chapter landed since) must not fail unnoticed: decide its verdict here."""
    for result in run.results:
        if result.id in EXPECTED or result.id in NAN_MINIBATCH:
            continue
        operations = {result.operation} if isinstance(result.operation, str) else set(result.operation)
        if operations <= PROVIDED:
            assert result.status == "pass", f"{result.id}: {result.status}: {result.message} (add it to EXPECTED)"
        else:
            assert result.status == "not-provided", f"{result.id}: {result.status}: {result.message}"


def test_dual_clip_variant_passes_the_clip_clauses_under_its_declaration():
    run = run_conformance("tianshou:dual_clip", clauses=",".join(PPO_CLIP_CLAUSES), profile="quick", seed=0)
    assert {r.id: r.status for r in run.results} == {clause: "pass" for clause in PPO_CLIP_CLAUSES}


def test_dual_clip_undeclared_is_caught():
    """The dual clip judged as if undeclared: A = -2, r = 10 has gradient 0 instead of +20."""
    undeclared = load("tianshou:dual_clip")
    undeclared.conventions = {**undeclared.conventions, "dual_clip": None}
    run = run_conformance(undeclared, clauses="PPO-DUAL-CLIP", profile="quick", seed=0)
    assert run["PPO-DUAL-CLIP"].status == "fail"


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
    new = adapter.trpo_update(policy, theta, actions, torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64), 0.01, 10, 10)
    step = new - theta
    assert float(0.5 * step @ F @ step) == pytest.approx(0.01, rel=1e-5)  # the damped quadratic meets max_kl
    assert float(0.5 * step @ F_undamped @ step) < 0.01
    A = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    x = adapter.conjugate_gradient(lambda v: A @ v, torch.tensor([1.0, 2.0], dtype=torch.float64), 2, 1e-20)
    assert torch.allclose(A @ x, torch.tensor([1.0, 2.0], dtype=torch.float64), atol=1e-12)


# NPG's step is 0.5 (F + 0.1 I)^-1 g whatever max_kl says: the direction is natural, the size is not.
NPG_EXPECTED = {"TRPO-NATURAL-STEP-DIRECTION": "pass", "TRPO-NATURAL-STEP-INVARIANCE": "pass",
                "TRPO-NATURAL-STEP-KL-BUDGET": "fail"}


def test_npg_variant_ignores_the_kl_budget():
    run = run_conformance("tianshou:npg", clauses=",".join(NPG_EXPECTED), profile="quick", seed=0)
    got = {r.id: r.status for r in run.results}
    budget = run["TRPO-NATURAL-STEP-KL-BUDGET"]
    if budget.status == "error" and "internal error in rlspec" in budget.message:
        pytest.xfail(f"suite: {budget.message} (the check's diagnose calls float() on a 1-element array; reported)")
    assert got == NPG_EXPECTED, [(r.id, r.status, r.message) for r in run.results]


def test_npg_step_is_half_the_damped_natural_direction():
    F = np.diag([1.0, 100.0])
    g = np.array([1.0, 1.0])
    step = adapter.npg.natural_step(g, lambda v: F @ np.asarray(v), 0.01, 20)
    assert step == pytest.approx(0.5 * np.linalg.solve(F + 0.1 * np.eye(2), g), rel=1e-6)

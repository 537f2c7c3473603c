"""The ``trl`` adapter against TRL 1.16: its verdicts for TRL's defaults and the variants ``bnpo`` and
``rloo`` (tests/adapters/expected/trl.toml), and the library facts behind them.

Skipped when TRL is not installed, unless RLSPEC_REQUIRE_ADAPTERS=1 (.ci/adapters), where a
missing library is an error.
"""

import math
import os

import numpy as np
import pytest

if os.environ.get("RLSPEC_REQUIRE_ADAPTERS"):
    import trl as _trl  # noqa: F401 - .ci/adapters: the library must be there
else:
    pytest.importorskip("trl")

import torch  # noqa: E402

from _verdicts import run, verdict_tests  # noqa: E402

from rlspec.checks import load, run_conformance# noqa: E402
from rlspec.checks.adapters import trl  # noqa: E402

F64 = torch.float64
REMOVED = {"token_gae", "assemble_rewards", "gae", "ppo_value_loss", "ppo_update"}  # TRL's PPO, gone after 1.12.0

test_verdict, test_unlisted_clauses, test_table_names_every_candidate = verdict_tests("trl")


def test_version_is_the_one_the_adapter_was_written_against():
    assert trl.RLSPEC_VERSION.startswith("trl 1.16."), trl.RLSPEC_VERSION


def test_ppo_and_gae_are_not_provided_and_the_adapter_says_why():
    assert not any(hasattr(trl, op) for op in REMOVED)
    assert "removed after TRL 1.12.0" in trl.RLSPEC_NOTE and "token_gae" in trl.RLSPEC_NOTE
    assert "No PPO, no GAE" in trl.__doc__


def test_kinds_trl_lacks_are_not_provided_and_said():
    result = run("trl")
    assert result["KL-K2-SECOND-ORDER"].message == "the candidate declares kl_estimate_kinds k1, k3: no k2"
    assert "judged on the declared kinds k3, k3+ only (kl_penalty_kinds)" in result["KL-PENALTY-EXPECTED-GRADIENT"].notes
    assert "judged on the declared kinds k1, k3 only (kl_estimate_kinds)" in result["KL-EXTREME-LOG-RATIO"].notes


def test_kl_penalty_failures_are_k3_plus(monkeypatch):
    """Without the xfail, KL-PENALTY-VALUES fails on k3+ with logp_old (w k3); the extreme-ratio failure is
    k3+'s gradient alone: judged on k3 only, the clause passes."""
    candidate = load("trl")
    candidate.xfail = {}
    run = run_conformance(candidate, profile="quick", seed=0, clauses="KL-PENALTY-*")
    values = run["KL-PENALTY-VALUES"]
    assert values.status == "fail" and "kind 'k3+'" in values.message and "logp_old" in values.message
    extreme = run["KL-PENALTY-EXTREME-LOG-RATIO"]
    assert extreme.status == "fail" and "kind 'k3+' d kl / d logp" in extreme.message, extreme.message
    monkeypatch.setitem(trl.RLSPEC_CONVENTIONS, "kl_penalty_kinds", ("k3",))
    assert run_conformance("trl", profile="quick", seed=0, clauses="KL-PENALTY-EXTREME-LOG-RATIO").ok


# ---------------------------------------------------------------------------------------------
# facts, on TRL's own code (GRPO and RLOO trainers)


def _groups(scores, groups, kind):
    return trl.group_advantages(np.array(scores, dtype=np.float64), np.array(groups), kind).tolist()


def test_group_advantages_match_the_measured_values():
    scores, groups = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.5], [0, 0, 0, 0, 1, 1, 1, 1]
    grpo = [0.865875, -0.865875, -0.865875, 0.865875, -0.499933, -0.499933, -0.499933, 1.4998]
    np.testing.assert_allclose(_groups(scores, groups, "grpo"), grpo, atol=1e-6)
    assert _groups(scores, groups, "mean") == [0.5, -0.5, -0.5, 0.5, -0.375, -0.375, -0.375, 1.125]
    np.testing.assert_allclose(_groups([1.0, 0.0, 0.0, 1.0], [0] * 4, "rloo"), [2 / 3, -2 / 3, -2 / 3, 2 / 3], atol=1e-7)
    nan_group = _groups([1.0, math.nan, 0.0, 1.0], [0] * 4, "grpo")
    np.testing.assert_allclose(nan_group, [0.57725, 0.0, -1.154501, 0.57725], atol=1e-6)
    assert nan_group[1] == 0.0
    # TRL's rewards are float32 (_calculate_rewards), so are its advantages
    assert trl.group_advantages(np.array([1.0, 0.0]), np.array([0, 0]), "grpo").dtype == torch.float32


def test_group_advantages_follow_ids_not_positions():
    # interleaved ids, unequal sizes: each sample gets its own group's statistics
    got = _groups([1.0, 5.0, 0.0, 7.0, 0.5], [42, 7, 42, 7, 9], "mean")
    assert got == [0.5, -1.0, -0.5, 1.0, 0.0]  # the singleton (id 9) gets 0


def _loss(A, r, **options):
    """One token with advantage A at ratio r through GRPOTrainer._compute_loss; (loss, d loss / d logp)."""
    logp = torch.tensor([[math.log(r)]], dtype=F64, requires_grad=True)
    loss = trl.token_ppo_loss(logp, torch.zeros(1, 1, dtype=F64), torch.tensor([[A]], dtype=F64),
                              torch.ones(1, 1, dtype=torch.bool), 0.2, 0.2, **options)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.item(), grad.item()


@pytest.mark.parametrize("A, r, loss, grad", [(2.0, 0.5, -1.0, -1.0), (2.0, 1.0, -2.0, -2.0), (2.0, 1.5, -2.4, 0.0),
                                              (-2.0, 0.5, 1.6, 0.0), (-2.0, 1.0, 2.0, 2.0), (-2.0, 1.5, 3.0, 3.0),
                                              (-2.0, 3.5, 7.0, 7.0)])
def test_clip_table_matches_the_notes(A, r, loss, grad):
    assert _loss(A, r) == pytest.approx((loss, grad), abs=1e-12)


def test_delta_is_a_dual_clip_when_above_the_clip_range():
    assert _loss(-2.0, 3.5, dual_clip=3.0) == pytest.approx((6.0, 0.0), abs=1e-12)
    assert _loss(2.0, 0.5, dual_clip=3.0) == pytest.approx((-1.0, -1.0), abs=1e-12)
    # delta is TRL's two-sided cap on the ratio: below 1 + epsilon_high it also caps A > 0 (the
    # clause's c > 1 + clip_high never draws this; TRL recommends delta > 1 + epsilon)
    assert _loss(2.0, 1.15, dual_clip=1.1) == pytest.approx((-2.2, 0.0), abs=1e-12)


def test_no_log_ratio_clamp():
    loss, grad = _loss(-2.0, math.exp(25.0))
    assert loss == pytest.approx(2 * math.exp(25.0), rel=1e-12) and grad == pytest.approx(loss, rel=1e-12)


MASK = torch.tensor([[1, 0, 0], [1, 1, 1]], dtype=torch.bool)


def _aggregate(loss_type, **options):
    """A = 1 on every token, ratio 1 (per-token loss -1); d loss / d logp."""
    logp = torch.zeros(2, 3, dtype=F64, requires_grad=True)
    loss = trl._compute_loss(logp, torch.ones(2, dtype=F64), MASK, loss_type=loss_type, **options)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.item(), grad.tolist()


def test_aggregation_matches_the_notes():
    sixth = 1 / 6
    assert _aggregate("grpo") == pytest.approx((-1.0, [[-0.5, 0, 0], [-sixth] * 3]))
    assert _aggregate("bnpo") == pytest.approx((-1.0, [[-0.25, 0, 0], [-0.25] * 3]))
    assert _aggregate("dr_grpo", max_completion_length=3) == pytest.approx((-2 / 3, [[-sixth, 0, 0], [-sixth] * 3]))
    assert _aggregate("dapo", num_items_in_batch=4) == pytest.approx((-1.0, [[-0.25, 0, 0], [-0.25] * 3]))
    assert _aggregate("luspo") == pytest.approx((-2.0, [[-0.5, 0, 0], [-0.5] * 3]))


def test_gradient_accumulation():
    """grpo / bnpo / dr_grpo / luspo divide by the accumulation steps; dapo's count spans the
    generation batch (steps_per_generation micro-batches, TRL's default = the accumulation steps)."""
    assert _aggregate("grpo", gradient_accumulation_steps=4) == pytest.approx((-0.25, [[-0.125, 0, 0], [-1 / 24] * 3]))
    assert _aggregate("dapo", num_items_in_batch=4, gradient_accumulation_steps=4, steps_per_generation=4) == \
        _aggregate("dapo", num_items_in_batch=4)


P, Q = torch.tensor([0.2, 0.3, 0.5], dtype=F64), torch.tensor([0.4, 0.4, 0.2], dtype=F64)


def _penalty(kind, logp, logp_ref, logp_old=None):
    leaf = logp.clone().reshape(1, -1).requires_grad_(True)
    old = None if logp_old is None else logp_old.reshape(1, -1)
    value = trl.kl_penalty(leaf, logp_ref.reshape(1, -1), kind, old)
    (grad,) = torch.autograd.grad(value.sum(), leaf)
    return value.detach()[0], grad[0]


def test_k3_values_and_gradients_per_token():
    for kind in ("k3", "k3+"):
        value, _ = _penalty(kind, P.log(), Q.log())
        np.testing.assert_allclose(value, [0.306853, 0.045651, 0.316291], atol=1e-6)
    _, plain = _penalty("k3", P.log(), Q.log())
    _, corrected = _penalty("k3+", P.log(), Q.log())
    np.testing.assert_allclose(plain, 1 - Q / P, rtol=1e-12)  # use_bias_correction_kl=False: forward KL's gradient
    np.testing.assert_allclose(corrected, (P / Q).log(), rtol=1e-12)  # True (TRL's default): reverse KL's (k2's)


def test_bias_correction_importance_weights_value_and_gradient_off_policy():
    old = torch.tensor([0.3, 0.3, 0.4], dtype=F64)
    value, grad = _penalty("k3+", P.log(), Q.log(), old.log())
    w = P / old
    k3 = Q / P - (Q / P).log() - 1
    np.testing.assert_allclose(value, w * k3, rtol=1e-12)  # the value is w k3, not k3 (KL-PENALTY-VALUES)
    np.testing.assert_allclose(grad, w * (P / Q).log(), rtol=1e-12)  # w grad k2: unbiased reverse KL
    reverse = old * grad - P * torch.sum(old * grad)  # expected gradient in the logits
    np.testing.assert_allclose(reverse, [-0.185272, -0.156268, 0.341540], atol=1e-6)


def test_bias_correction_gradient_cancels_catastrophically():
    """docs/bugs-found.md: k3 * exp(logp - old) with the ratio not detached differentiates to
    (1 - e^x) + (e^x - 1 - x); the two terms cancel and lose -x once e^x dwarfs it."""
    ref = torch.tensor([-0.1], dtype=F64)
    _, grad = _penalty("k3+", torch.tensor([-100.0], dtype=F64), ref)
    assert grad.item() == 0.0  # exact: log(pi / pi_ref) = -99.9
    _, grad = _penalty("k3+", torch.tensor([-30.0], dtype=F64), torch.tensor([-0.3], dtype=F64))
    assert grad.item() == -29.7001953125  # exact: -29.7 (one ulp of e^29.7 = 2^-9 lost)
    _, grad = _penalty("k3", torch.tensor([-100.0], dtype=F64), ref)
    assert grad.item() == pytest.approx(-math.expm1(99.9), rel=1e-12)  # plain k3 is exact


def test_only_k3_exists():
    with pytest.raises(ValueError, match="TRL has only k3"):
        trl.kl_penalty(P.log()[None], Q.log()[None], "k2")
    with pytest.raises(ValueError, match="no k2 estimator"):
        trl.kl_estimate(P.log(), Q.log(), "k2")


def test_kl_estimates_match_the_measured_values():
    np.testing.assert_allclose(trl.kl_estimate(P.log(), Q.log(), "k1"), [-0.693147, -0.287682, 0.916291], atol=1e-6)
    np.testing.assert_allclose(trl.kl_estimate(P.log(), Q.log(), "k3"), [0.306853, 0.045651, 0.316291], atol=1e-6)

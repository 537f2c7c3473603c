"""The token-level RLHF chapter: the reference is pinned to the libraries' measured numbers, the
checks' layouts and oracles are right, the proofs refute realistic wrong versions, and named library
behaviours get the verdicts (and diagnoses) they should, clause by clause."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

from conftest import ROOT
from rlspec.checks import load, run_conformance
from rlspec.checks.clauses import rlhf as checks
from rlspec.checks.runner.loader import LoadError
from rlspec.checks.kit.strategies import tokens
from rlspec.reference import rlhf as ref
from rlspec.spec import contract
from rlspec.spec.contract import ContractError
from rlspec.spec.proofs import PROOFS, PROVED, REFUTED
from rlspec.spec.proofs import rlhf as proofs

MUTANTS = ROOT / "tests" / "mutants"
VARIANTS = ROOT / "tests" / "variants"
T = lambda x: torch.tensor(x, dtype=torch.float64)
B = lambda x: torch.tensor(x, dtype=torch.bool)


# ---------------------------------------------------------------------------------------------
# the reference against the libraries' measured numbers


KNOWN = [a for a in contract.known_answers().values() if a.id.startswith("rlhf.")]
LEAVES = {"aggregate_loss": "per_token_loss", "token_ppo_loss": "logp_new"}


def reference_call(answer, **replaced):
    """The reference on the known answer's inputs (losses as torch, their leaf requiring grad): (outputs, gradient)."""
    x = {**answer.arrays(), **replaced}
    function = getattr(ref, answer.operation)
    if answer.operation not in LEAVES:
        out = function(**x)
        return dict(zip([o.name for o in contract.operations()[answer.operation].outputs], out if isinstance(out, tuple) else (out,))), None
    x = {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in x.items()}
    leaf = x[LEAVES[answer.operation]].requires_grad_(True)
    loss = function(**x)
    (grad,) = torch.autograd.grad(loss, leaf)
    return {"loss": float(loss.detach())}, grad.numpy()


def close(actual, expected, published):
    """Equal where the known answer states a number (NaN: a masked position it leaves unstated)."""
    expected = np.asarray(expected, dtype=np.float64)
    stated = ~np.isnan(expected)
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64)[stated], expected[stated], rtol=1e-14, atol=published + 1e-15)


@pytest.mark.parametrize("answer", KNOWN, ids=lambda a: a.id)
def test_the_reference_gives_every_known_answer(answer):
    outputs, grad = reference_call(answer)
    for name in answer.outputs:
        close(outputs[name], answer.value(name), answer.published_error(name))
    mask = answer.arrays()["mask"]
    for name in answer.derived:
        value = answer.value(name)
        if name.startswith("d loss / d") and name.endswith("at each row's real tokens"):
            close(grad, np.where(mask, np.array(value)[:, None], 0.0), answer.published_error(name))
        elif name.startswith("d loss / d"):
            close(grad, value, answer.published_error(name))
        elif name == "loss of each token":  # the loss is a sum: each token alone gives its own
            for b, t in zip(*np.nonzero(mask)):
                alone = {k: v[b:b + 1, t:t + 1] for k, v in answer.arrays().items() if isinstance(v, np.ndarray)}
                close(reference_call(answer, **alone)[0]["loss"], value[b][t], answer.published_error(name))
        elif name == "ratio":
            x = answer.arrays()
            close(np.exp(x["logp_new"] - x["logp_old"]), value, 1e-15)


def test_gae_left_padding_and_masked_nan():
    left, _ = ref.token_gae(np.array([[9.0, 1.0, 1.0, 2.0]]), np.array([[1e6, 0.5, 0.5, 0.5]]), np.array([[0, 1, 1, 1]], bool), 0.5, 0.5)
    assert left[0, 1:].tolist() == contract.known_answer("rlhf.gae-reference-row").outputs["advantages"][0]
    adv, ret = ref.token_gae(np.array([[1.0, np.nan, 2.0]]), np.array([[0.5, np.nan, 0.5]]), np.array([[1, 0, 1]], bool), 0.5, 0.5)
    assert np.isfinite(adv[0, [0, 2]]).all() and adv[0, [0, 2]].tolist() == [1.125, 1.5]


def test_openrlhf_interior_hole_number_and_g2():
    zeroed = [w for w, cause in checks._wrong_gae(checks.HOLE_CASE) if "zeroed" in cause][0]
    assert zeroed[0, 0] == 0.533203125  # research §3.2: OpenRLHF's middle hole
    g2 = checks.gae_case([[0.0, 0.0, 0.0, 1.0]], [[0.0] * 4], [[1, 0, 0, 1]], 1.0, 0.95)
    uniform = [w for w, cause in checks._wrong_gae(g2) if "ignored" in cause][0]
    assert uniform[0, 0] == pytest.approx(0.857375)  # 0.95^3: the two observation tokens are steps
    assert ref.token_gae(g2.rewards, g2.values, g2.mask, 1.0, 0.95)[0][0, 0] == 0.95  # skipped: one step


def test_rewards_layouts():
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [1, 1, 0, 1, 0]], bool)
    out = ref.assemble_rewards(np.array([1.0, 2.0, 3.0, 4.0]), np.zeros((4, 5)), mask, 0.1)
    assert out.tolist() == [[0, 0, 1, 0, 0], [0, 0, 0, 0, 2], [0, 0, 0, 0, 3], [0, 0, 0, 4, 0]]


def grad_of(fn, x):
    leaf = T(x).requires_grad_(True)
    loss = fn(leaf)
    (grad,) = torch.autograd.grad(loss, leaf)
    return float(loss.detach()), grad.numpy()


def test_the_checks_read_the_worked_example_for_every_mode():
    assert list(checks.WORKED) == list(checks.MODES)
    loss, _ = grad_of(lambda l: ref.aggregate_loss(l, B(checks.WORKED_MASK), "token-mean", num_tokens=8), checks.WORKED_LOSSES)
    assert loss == 0.5


def test_aggregation_g12_own_counts():
    losses, mask = T([[4.0, 9.0, 9.0], [0.0, 0.0, 0.0]]), B([[1, 0, 0], [1, 1, 1]])
    parts = ref.aggregate_loss(losses[:1], mask[:1], "token-mean", num_tokens=4) + ref.aggregate_loss(losses[1:], mask[1:], "token-mean", num_tokens=4)
    own = ref.aggregate_loss(losses[:1], mask[:1], "token-mean") + ref.aggregate_loss(losses[1:], mask[1:], "token-mean")
    assert float(parts) == 1.0 and float(own) == 4.0


def test_aggregation_rejects_an_unknown_mode():
    with pytest.raises(ValueError, match="unknown aggregation mode"):
        ref.aggregate_loss(T([[1.0]]), B([[1]]), "token-sum")


def test_the_token_tables_are_the_seeds_and_the_ppo_chapters():
    """RLHF's per-token table and the PPO chapter's per-sample one are the same clip gradient table: the same rows."""
    ppo = contract.known_answer("ppo.clip-gradient-table")
    rows = list(zip(ppo.inputs["advantages"], ppo.derived["ratio"], ppo.derived["d loss / d logp_new, each row alone"]))
    assert [(A, r, g) for A, r, _, g in checks.TOKEN_TABLE] == rows


def test_token_ppo_padding_and_mixed_rows():
    value, g = grad_of(lambda lp: ref.token_ppo_loss(lp, T([[0.0, 0.0]]), T([[-2.0, 2.0]]), B([[1, 1]]), 0.2, 0.2, 3.0),
                       [[math.log(3.5), math.log(0.5)]])
    assert value == pytest.approx(6.0 - 1.0) and g.tolist() == [[0.0, pytest.approx(-1.0)]]  # verl: A=-2 r=3.5 -> 6, 0
    value, g = grad_of(lambda lp: ref.token_ppo_loss(lp, T([[0.0, 1.0]]), T([[2.0, 5.0]]), B([[1, 0]]), 0.2, 0.2), [[0.0, 800.0]])
    assert value == -2.0 and g.tolist() == [[-2.0, 0.0]]  # exp(799) overflows only where masked: no NaN gradient
    value, g = grad_of(lambda lp: ref.token_ppo_loss(lp, T([[-1000.1]]), T([[1.0]]), B([[1]]), 0.2, 0.2), [[-1000.0]])
    assert value == pytest.approx(-math.exp(0.1), rel=1e-12) and g[0, 0] == pytest.approx(-math.exp(0.1), rel=1e-12)  # the log-space known answer


# ---------------------------------------------------------------------------------------------
# the checks' machinery


@given(st.data())
def test_row_layouts_place_every_real_token_once(data):
    lengths = data.draw(st.lists(st.integers(2, 5), min_size=1, max_size=4))
    interior = data.draw(st.booleans())
    positions, width = data.draw(tokens.row_layouts(lengths, interior=interior))
    for n, where in zip(lengths, positions):
        assert len(where) == n and len(set(where)) == n and max(where) < width and where == sorted(where)
        if interior:
            assert where[-1] - where[0] + 1 > n  # at least one interior span


@given(st.data())
def test_left_padded_rows_end_at_the_last_column(data):
    lengths = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    positions, width = data.draw(tokens.row_layouts(lengths, padding=("left",)))
    assert all(where[-1] == width - 1 and where[0] > 0 for where in positions)


def test_compacted_oracle_equals_the_reference_on_a_hole():
    expected, tol = checks.compacted_gae(checks.HOLE_CASE, 2.0**-53)
    adv, _ = ref.token_gae(checks.HOLE_CASE.rewards, checks.HOLE_CASE.values, checks.HOLE_CASE.mask, 0.5, 0.5)
    real = checks.HOLE_CASE.mask
    assert np.all(np.abs(adv[real] - expected[real]) <= tol[real]) and np.all(tol[~real] == 0)


def test_aggregation_weights_match_autograd_of_the_reference():
    rng = np.random.default_rng(0)
    mask = np.array([[1, 1, 0, 1], [0, 1, 1, 0], [1, 1, 1, 1]], bool)
    for mode in checks.MODES:
        for extra in ({}, {"num_tokens": 11} if mode == "token-mean" else {"norm_length": 7}):
            _, grad = grad_of(lambda l: ref.aggregate_loss(l, B(mask), mode, **extra), rng.normal(size=(3, 4)))
            assert grad == pytest.approx(checks.aggregation_weights(mask, mode, **extra), rel=1e-14)


# ---------------------------------------------------------------------------------------------
# proofs: each refutes a realistic wrong version


def _zeroed_recursion(rewards, values, mask, gamma, lam):
    """OpenRLHF: masked rewards and values zeroed, every position a step."""
    return proofs.masked_gae([r * m for r, m in zip(rewards, mask)], [v * m for v, m in zip(values, mask)], [1] * len(mask), gamma, lam)


def _padded_mean(losses, mask, mode, num_tokens=None, norm_length=None):
    """token-mean as (l * mask).mean()."""
    if mode == "token-mean" and num_tokens is None:
        num_tokens = len(mask) * len(mask[0])
    return proofs.aggregate(losses, mask, mode, num_tokens, norm_length)


WRONG = {
    "rlhf.skipped_span_gae_equals_compacted": dict(recursion=_zeroed_recursion),
    "rlhf.aggregation_gradient_weights": dict(aggregation=_padded_mean),
    "rlhf.token_mean_microbatch_invariance": dict(aggregation=lambda l, m, mode, num_tokens=None, norm_length=None: proofs.aggregate(l, m, mode)),
    "rlhf.token_clip_gradient": dict(objective=lambda r, A, lo, hi, c=None: sp.Max(1 - lo, sp.Min(r, 1 + hi)) * A),
    "rlhf.token_dual_clip": dict(objective=lambda r, A, lo, hi, c=None: proofs.token_objective(r, A, lo, hi) if c is None
                                 else sp.Max(proofs.token_objective(r, A, lo, hi), c * A)),
}


@pytest.mark.parametrize("proof_id", sorted(WRONG))
def test_rlhf_proof_refutes_a_wrong_version(proof_id):
    assert PROOFS[proof_id]().status == PROVED
    result = PROOFS[proof_id](**WRONG[proof_id])
    assert result.status == REFUTED and " = " in result.counterexample


# ---------------------------------------------------------------------------------------------
# verdicts, clause by clause


def verdicts(spec, pattern="RLHF-*", seed=0, **options):
    run = run_conformance(load(str(spec)), clauses=pattern, seed=seed, **options)
    return {r.id: r for r in run.results}


def test_openrlhf_gae_fails_only_the_interior_mask_clause():
    results = verdicts(MUTANTS / "rlhf_gae_interior_mask_zeroed.py", "RLHF-GAE-*")
    assert {k for k, r in results.items() if r.status != "pass"} == {"RLHF-GAE-INTERIOR-MASK-SKIPPED"}
    failure = results["RLHF-GAE-INTERIOR-MASK-SKIPPED"]
    assert "OpenRLHF" in failure.cause and ("zeroed" in failure.cause or "multiplies values and rewards by the action mask" in failure.cause)


def test_verl_whitened_gae_is_diagnosed():
    result = verdicts(MUTANTS / "rlhf_gae_whitened_inside.py", "RLHF-GAE-KNOWN-ANSWER")["RLHF-GAE-KNOWN-ANSWER"]
    assert result.status == "fail" and "whitened" in result.cause


def test_trl_score_after_eos_is_diagnosed():
    result = verdicts(MUTANTS / "rlhf_rewards_score_after_eos.py", "RLHF-REWARDS-SCORE-ON-LAST-REAL-TOKEN")
    result = result["RLHF-REWARDS-SCORE-ON-LAST-REAL-TOKEN"]
    assert result.status == "fail" and "sequence_length + 1" in result.cause


def test_undeclared_clamp_fails_with_a_diagnosis_declared_clamp_passes():
    result = verdicts(MUTANTS / "rlhf_ppo_log_ratio_clamp_undeclared.py", "RLHF-PPO-LOG-RATIO-CLAMP")["RLHF-PPO-LOG-RATIO-CLAMP"]
    assert result.status == "fail" and "log_ratio_clamp" in result.cause
    assert verdicts(VARIANTS / "rlhf_verl_style.py", "RLHF-PPO-*")["RLHF-PPO-LOG-RATIO-CLAMP"].status == "pass"


def test_dual_clip_mutants_are_diagnosed():
    on_positive = verdicts(MUTANTS / "rlhf_ppo_dual_clip_on_positive_advantages.py", "RLHF-PPO-DUAL-CLIP")["RLHF-PPO-DUAL-CLIP"]
    ignored = verdicts(MUTANTS / "rlhf_ppo_dual_clip_ignored.py", "RLHF-PPO-DUAL-CLIP")["RLHF-PPO-DUAL-CLIP"]
    assert on_positive.status == ignored.status == "fail"
    assert "positive advantages" in on_positive.cause and "ignored" in ignored.cause


def test_aggregation_mutants_are_diagnosed():
    padded = verdicts(MUTANTS / "rlhf_agg_mean_over_padded_positions.py", "RLHF-AGG-KNOWN-ANSWER")["RLHF-AGG-KNOWN-ANSWER"]
    assert padded.status == "fail" and "B * L" in padded.cause
    verl = verdicts(MUTANTS / "rlhf_agg_sum_norm_by_width_only.py", "RLHF-AGG-KNOWN-ANSWER")["RLHF-AGG-KNOWN-ANSWER"]
    assert verl.status == "fail" and "#3741" in verl.cause


def _candidate(tmp_path, name, conventions, aggregate_body="return ref.aggregate_loss(per_token_loss, mask, mode, num_tokens, norm_length)"):
    """A candidate file with the reference's losses and the given conventions."""
    path = tmp_path / f"{name}.py"
    path.write_text(
        "from rlspec.reference import rlhf as ref\n"
        f"RLSPEC_CONVENTIONS = {conventions!r}\n"
        "token_ppo_loss = ref.token_ppo_loss\n"
        "def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):\n"
        f"    {aggregate_body}\n"
    )
    return str(path)


@pytest.mark.parametrize("conventions, clause", [({"log_ratio_clamp": -1.0}, "RLHF-PPO-LOG-RATIO-CLAMP"),
                                                 ({"seq_mean_token_mean_eps": "tiny"}, "RLHF-AGG-KNOWN-ANSWER")])
def test_invalid_conventions_are_load_errors(tmp_path, conventions, clause):
    with pytest.raises(LoadError, match=f"{next(iter(conventions))} takes "):
        run_conformance(_candidate(tmp_path, "bad", conventions), clauses=[clause])


@pytest.mark.parametrize("declared, used, ok", [(1e-8, 1e-8, True), (1e-3, 1e-3, True), (0.0, 1e-3, False)])
def test_declared_seq_mean_eps_is_checked_exactly(tmp_path, declared, used, ok):
    body = ("m = mask.to(per_token_loss.dtype); return ((per_token_loss * m).sum(-1) / (m.sum(-1) + %r)).mean() "
            "if mode == 'seq-mean-token-mean' else ref.aggregate_loss(per_token_loss, mask, mode, num_tokens, norm_length)" % used)
    spec = _candidate(tmp_path, f"eps{int(ok)}{declared}".replace(".", "_").replace("-", "_"), {"seq_mean_token_mean_eps": declared}, body)
    assert run_conformance(spec, clauses=["RLHF-AGG-GRADIENT-WEIGHTS", "RLHF-AGG-LENGTH-BIAS"]).ok is ok


# ---------------------------------------------------------------------------------------------
# aggregate_loss_modes: a candidate that has some modes only (OpenRLHF: token-mean, seq-mean-token-mean)


def _two_modes(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
    from rlspec.reference import rlhf as reference

    if mode not in ("token-mean", "seq-mean-token-mean"):
        raise NotImplementedError(f"no {mode} here")
    return reference.aggregate_loss(per_token_loss, mask, mode, num_tokens, norm_length)


def _two_mode_candidate(conventions):
    from rlspec.checks.runner.protocol import Candidate

    return Candidate(spec="test", name="test", operations={"aggregate_loss": _two_modes}, array="torch",
                     conventions=conventions)


def test_declared_modes_judge_what_the_candidate_has():
    run = run_conformance(_two_mode_candidate({"aggregate_loss_modes": ["seq-mean-token-mean", "token-mean"]}), clauses="RLHF-AGG-*")
    assert [r.status for r in run.results] == ["pass"] * 6
    note = "judged on the declared modes token-mean, seq-mean-token-mean only (aggregate_loss_modes)"
    assert all(note in r.notes for r in run.results)
    undeclared = run_conformance(_two_mode_candidate({}), clauses="RLHF-AGG-KNOWN-ANSWER")
    assert undeclared["RLHF-AGG-KNOWN-ANSWER"].status == "error"


def test_a_clause_about_a_mode_not_declared_is_not_provided():
    run = run_conformance(_two_mode_candidate({"aggregate_loss_modes": ["seq-mean-token-mean"]}), clauses="RLHF-AGG-MICROBATCH-INVARIANT")
    assert run["RLHF-AGG-MICROBATCH-INVARIANT"].status == "not-provided"
    assert run["RLHF-AGG-MICROBATCH-INVARIANT"].message == "the candidate declares aggregate_loss_modes seq-mean-token-mean: no token-mean"


@pytest.mark.parametrize("declared", ["token-mean", [], ["token-mean", "token-sum"]])
def test_malformed_modes_are_refused(declared):
    with pytest.raises((ContractError, LoadError), match="aggregate_loss_modes takes a non-empty list of 'token-mean'"):
        run_conformance(_two_mode_candidate({"aggregate_loss_modes": declared}), clauses="RLHF-AGG-KNOWN-ANSWER")

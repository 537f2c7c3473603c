"""The KL chapter: the reference pinned to exact values (the KL known answer to 16 digits, computed with
mpmath at 40 digits), the adaptive rule at and around its thresholds, the tolerances, and the
declared conventions checked exactly (a wrong declaration fails)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
import torch

from rlspec.checks import load, run_conformance
from rlspec.checks.clauses import kl as checks
from rlspec.checks.runner.protocol import Candidate
from rlspec.reference import kl as ref
from rlspec.spec import contract
from rlspec.spec.contract import ContractError

CLAUSES = "kl"
VARIANTS = "tests/variants"
KNOWN = [a for a in contract.known_answers("kl_estimate").values()]
LOG_P, LOG_Q = (contract.known_answer("kl.known-k1").arrays()[k] for k in ("logp_sampler", "logp_other"))
ESTIMATORS = {"k1": lambda x: -x, "k2": lambda x: x**2 / 2, "k3": lambda x: sp.exp(x) - 1 - x}


def exact_values(answer, digits=40):
    """Per-sample estimates and their expectation under the sampler, to ``digits`` digits, from the exact
    distributions the known answer's log-probabilities are the logarithms of."""
    p = [sp.Rational(v) for v in answer.exact("exp(logp_sampler)")]
    q = [sp.Rational(v) for v in answer.exact("exp(logp_other)")]
    k = ESTIMATORS[answer.inputs["kind"]]
    per_sample = [k(sp.log(qi) - sp.log(pi)) for pi, qi in zip(p, q)]
    return [float(sp.N(v, digits)) for v in per_sample], float(sp.N(sum(pi * v for pi, v in zip(p, per_sample)), digits))


def candidate(conventions=None, **operations) -> Candidate:
    operations = operations or {"kl_estimate": ref.kl_estimate, "kl_coefficient_update": ref.kl_coefficient_update}
    return Candidate(spec="test", name="test", operations=operations, conventions=dict(conventions or {}))


# ---------------------------------------------------------------------------------------------
# the reference, pinned


@pytest.mark.parametrize("answer", KNOWN, ids=lambda a: a.id)
def test_the_known_answer_is_its_distributions_logarithms(answer):
    x = answer.arrays()
    assert x["logp_sampler"].tolist() == np.log(answer.value("exp(logp_sampler)")).tolist()
    assert x["logp_other"].tolist() == np.log(answer.value("exp(logp_other)")).tolist()


@pytest.mark.parametrize("answer", KNOWN, ids=lambda a: a.id)
def test_the_published_digits_are_the_exact_values_rounded(answer):
    per_sample, expectation = exact_values(answer)
    if "estimates" in answer.outputs:
        np.testing.assert_array_less(np.abs(np.subtract(answer.value("estimates"), per_sample)), answer.published_error("estimates") + 1e-17)
    assert abs(answer.value("sum exp(logp_sampler) estimates") - expectation) <= answer.published_error("sum exp(logp_sampler) estimates")


@pytest.mark.parametrize("answer", KNOWN, ids=lambda a: a.id)
def test_the_reference_gives_every_known_answer(answer):
    x = answer.arrays()
    estimates = ref.kl_estimate(x["logp_sampler"], x["logp_other"], x["kind"])
    per_sample, expectation = exact_values(answer)
    # log(0.3) and friends are rounded inputs: the derived per-sample bound covers them (a few 1e-16)
    tol = checks.per_sample_tolerance(x["kind"], x["logp_sampler"], x["logp_other"], 2.0**-53)
    assert tol.max() < 5e-14
    np.testing.assert_array_less(np.abs(estimates - per_sample), tol)
    assert float(np.sum(np.exp(x["logp_sampler"]) * estimates)) == pytest.approx(expectation, abs=1e-15)


def test_k3_at_extreme_log_ratios_is_unclamped():
    assert ref.kl_estimate(np.array([0.0]), np.array([30.0]), "k3")[0] == pytest.approx(10686474581493.462, rel=1e-15)  # e^30 - 31
    assert ref.kl_estimate(np.array([-1000.0]), np.array([-1030.0]), "k3")[0] == pytest.approx(29.000000000000094, rel=1e-15)
    assert ref.kl_estimate(np.array([-1000.0]), np.array([-970.0]), "k1")[0] == -30.0


def test_k3_is_zero_at_equal_log_probabilities_and_positive_elsewhere():
    x = np.array([-30, -1, -1e-8, 0, 1e-8, 1, 30], dtype=float)
    k3 = ref.kl_estimate(np.zeros_like(x), x, "k3")
    assert k3[3] == 0.0 and np.all(k3[x != 0] > 0)
    assert k3[2] == pytest.approx(5e-17, rel=1e-6)  # expm1 keeps x^2 / 2 where exp(x) - 1 - x would give 0


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError, match="k1"):
        ref.kl_estimate(LOG_P, LOG_Q, "k4")


@pytest.mark.parametrize("answer", list(contract.known_answers("kl_coefficient_update").values()), ids=lambda a: a.id)
def test_adaptive_coefficient_rule(answer):
    # target 3 * 2^-8: the thresholds target / 1.5 = 2^-7 and 1.5 target = 0.017578125 are exact; both strict
    assert ref.kl_coefficient_update(**answer.inputs) == answer.outputs["beta"]


@pytest.mark.parametrize("kl, expected", [(0.0, 0.25), (0.01171875, 0.5), (1.0, 1.0)])
def test_adaptive_coefficient_rule_away_from_the_thresholds(kl, expected):
    assert ref.kl_coefficient_update(0.5, kl, 0.01171875) == expected


# ---------------------------------------------------------------------------------------------
# the checks' machinery


def test_per_sample_tolerances_scale_with_the_inputs_and_are_absolute_below_eta():
    a, b = np.array([-1000.0, -0.5]), np.array([-970.0, -0.25])
    tol = checks.per_sample_tolerance("k3", a, b, 2.0**-53)
    assert tol[0] > np.exp(30) * 2 * 2.0**-53 * 1970  # the log ratio's rounding, amplified by e^x
    assert tol[1] < 5e-14  # about 100 u at |log r| = 0.25
    assert checks.per_sample_tolerance("k2", np.array([0.0]), np.array([1e-30]), 2.0**-24)[0] >= 4 * np.finfo(np.float32).smallest_normal


def test_boundaries_are_checked_only_where_they_are_exact():
    assert checks.boundary_is_exact(0.01171875, 1.5)
    assert not checks.boundary_is_exact(0.01, 1.5)
    assert checks.boundary_is_exact(0.25, 2.0)


def test_expected_update_in_exact_arithmetic():
    assert checks.expected_update(1.0, 0.015, 0.01, 2.0, 1.5) == 1.0  # 0.015 is just below 1.5 x 0.01 in binary
    assert checks.expected_update(1.0, 0.0151, 0.01, 2.0, 1.5) == 2.0
    assert checks.expected_update(1.0, 0.006, 0.01, 2.0, 1.5) == 0.5


def test_scalar_results_are_accepted_and_keep_their_precision():
    assert checks._as_array(0.5).dtype == np.float64 and checks._as_array(np.float32(0.5)).dtype == np.float32
    assert checks._as_array(True) is True and checks._as_array(None) is None


# ---------------------------------------------------------------------------------------------
# conformance: the reference passes, conventions are checked exactly


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("seed", [0, 11])
def test_reference_passes_the_chapter(dtype, seed):
    run = run_conformance(candidate(), clauses=CLAUSES, dtype=dtype, seed=seed)
    assert run.ok and {r.status for r in run.results} == {"pass"}, [(r.id, r.message) for r in run.failures]


def test_reference_passes_the_chapter_at_ci_profile():
    run = run_conformance(candidate(), clauses=CLAUSES, profile="ci", seed=5)
    assert run.ok, [(r.id, r.message) for r in run.failures]


def test_declared_argument_order_is_checked_exactly():
    declared = load(f"{VARIANTS}/kl_torch_new_old_order.py")
    assert run_conformance(declared, clauses="KL-DIRECTION").ok
    declared.conventions = {}  # the same adapter without its declaration reads the arguments backwards
    result = run_conformance(declared, clauses="KL-DIRECTION")["KL-DIRECTION"]
    # the check's diagnosis (declare 'other, sampler') or the known mistake the outputs match (the arguments swapped)
    assert result.status == "fail" and ("other, sampler" in result.cause or "read the other way round" in result.cause)
    wrong = candidate({"kl_estimate_arguments": "other, sampler"})  # the reference, declaring the wrong order
    assert run_conformance(wrong, clauses="KL-DIRECTION")["KL-DIRECTION"].status == "fail"


def test_declared_adaptive_factor_and_threshold_are_checked_exactly():
    declared = load(f"{VARIANTS}/kl_naive_numpy.py")
    assert run_conformance(declared, clauses="KL-ADAPTIVE-PENALTY").ok
    declared.conventions = {}
    assert run_conformance(declared, clauses="KL-ADAPTIVE-PENALTY")["KL-ADAPTIVE-PENALTY"].status == "fail"


def test_bad_declarations_are_refused_and_unusable_results_are_errors():
    with pytest.raises(ContractError, match="kl_estimate_arguments takes 'sampler, other' or 'other, sampler'"):
        candidate({"kl_estimate_arguments": "q, p"})
    with pytest.raises(ContractError, match="kl_adaptive_factor takes a finite number > 1"):
        candidate({"kl_adaptive_factor": 0.5})
    none = candidate(kl_coefficient_update=lambda beta, kl, target: None)
    result = run_conformance(none, clauses="KL-ADAPTIVE-PENALTY")["KL-ADAPTIVE-PENALTY"]
    assert result.status == "error" and "None" in result.message


def test_overflow_is_a_failure_of_the_extreme_clause():
    def ratio_of_probabilities(logp_sampler, logp_other, kind):  # C13: densities underflow at -1000
        r = np.exp(logp_other) / np.exp(logp_sampler)
        return {"k1": -np.log(r), "k2": 0.5 * np.log(r) ** 2, "k3": r - 1 - np.log(r)}[kind]

    result = run_conformance(candidate(kl_estimate=ratio_of_probabilities), clauses="KL-EXTREME-LOG-RATIO")["KL-EXTREME-LOG-RATIO"]
    assert result.status == "fail" and "on finite input" in result.message


def test_torch_tensors_pass_through_the_scalar_wrapper():
    update = lambda beta, kl, target: torch.tensor(beta * 2.0 if kl > 1.5 * target else beta / 2.0 if kl < target / 1.5 else beta,
                                                   dtype=torch.float64)
    assert run_conformance(candidate(kl_coefficient_update=update), clauses="KL-ADAPTIVE-PENALTY").ok


# ---------------------------------------------------------------------------------------------
# kl_estimate_kinds: a candidate that has some kinds only (TRL: k1 and k3)


def _without_k2(logp_sampler, logp_other, kind):
    if kind == "k2":
        raise ValueError("no k2 here")
    return ref.kl_estimate(logp_sampler, logp_other, kind)


def test_declared_kinds_judge_what_the_candidate_has():
    run = run_conformance(candidate({"kl_estimate_kinds": ("k1", "k3")}, kl_estimate=_without_k2), clauses="KL-*")
    statuses = {r.id: r.status for r in run.results}
    assert statuses["KL-K2-SECOND-ORDER"] == "not-provided"
    assert run["KL-K2-SECOND-ORDER"].message == "the candidate declares kl_estimate_kinds k1, k3: no k2"
    assert statuses["KL-EXTREME-LOG-RATIO"] == "pass"
    assert "judged on the declared kinds k1, k3 only (kl_estimate_kinds)" in run["KL-EXTREME-LOG-RATIO"].notes
    assert all(statuses[c] == "pass" for c in ("KL-K1-UNBIASED", "KL-K3-UNBIASED", "KL-K3-NONNEGATIVE", "KL-DIRECTION"))


def test_undeclared_missing_kind_is_an_error():
    run = run_conformance(candidate(kl_estimate=_without_k2), clauses="KL-K2-SECOND-ORDER")
    assert run["KL-K2-SECOND-ORDER"].status == "error" and "no k2 here" in run["KL-K2-SECOND-ORDER"].message


@pytest.mark.parametrize("declared", ["k1", (), ("k1", "k4")])
def test_malformed_kinds_are_refused(declared):
    with pytest.raises(ContractError, match="kl_estimate_kinds takes a non-empty list of 'k1', 'k2', 'k3'"):
        candidate({"kl_estimate_kinds": declared})

"""Checks for the KL chapter (``spec/clauses/40_kl.toml``).

Expectations are exact: the candidate gets every outcome of a categorical distribution at once and
its per-sample estimates are weighted by the sampler's probabilities, so there is no sampling noise
to tolerate. Expected numbers come from the formulas (k1 = -x, k2 = x^2/2, k3 = e^x - 1 - x with
x = log r = logp_other - logp_sampler, evaluated in float64 on the inputs exactly as the candidate
received them), from KL(p || q) = sum p (log p - log q), and from the KL known answer's published values.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

from ..kit.context import Call
from ..kit import edges
from ..kit.assertions import ClauseFailure, assert_close, matches
from ..kit.kl_estimators import exact, expectation_tolerance, kl_divergence, order_note, per_sample_tolerance, run_kl
from ..kit.registry import check
from ..kit.strategies import kl as draws
from ..kit.tolerances import U64
from ...spec import contract

KINDS = contract.convention("kl_estimate_kinds").allowed

# The KL known answer (spec/contract/40_kl.toml): the sampler p and the other distribution q, with the
# estimates per sample published to 6 decimals and their expectations to 8.
KNOWN = {kind: contract.known_answer(f"kl.known-{kind}") for kind in ("k1", "k2", "k3")}
REVERSED = {kind: contract.known_answer(f"kl.known-reversed-{kind}") for kind in ("k1", "k3")}
EXPECTATION = "sum exp(logp_sampler) estimates"  # the derived number: E_sampler[k]


# calling the candidate under its declared argument order: rlspec.checks.kit.kl_estimators.run_kl


def check_per_sample(ctx, kind, logp_sampler, logp_other, *, what="", cause=""):
    estimates, call, a, b = run_kl(ctx, logp_sampler, logp_other, kind)
    assert_close(estimates, exact(kind, a, b), per_sample_tolerance(kind, a, b, call.unit_roundoff),
                 what=f"{kind} per sample{what}" + order_note(ctx), call=call.code, cause=cause)
    return estimates, call, a, b


def check_expectation(ctx, kind, log_p, log_q, expected, *, what):
    """``sum_x p(x) k(x)`` over every outcome against ``expected(a, b)``; returns ``(expectation, tol)``."""
    estimates, call, a, b = run_kl(ctx, log_p, log_q, kind)
    mean = math.fsum(np.exp(a) * estimates)
    tol = expectation_tolerance(kind, a, b, estimates, call.unit_roundoff)
    assert_close(mean, expected(a, b), tol, what=what + order_note(ctx), call=call.code,
                 diagnose=lambda value: _diagnose_direction(float(value), tol, a, b))
    return mean, tol


def _diagnose_direction(value: float, tol: float, a, b) -> str:
    """Name the mistake when the expectation equals a known wrong answer for these inputs."""
    p, x = np.exp(a), b - a
    wrong = [
        (-kl_divergence(a, b), "the log ratio is taken the other way round (log p/q instead of log q/p)"),
        (math.fsum(p * (np.expm1(-x) + x)), "k3 with the ratio inverted, p/q instead of q/p (bug D1, ColossalAI #3696)"),
        (kl_divergence(b, a), "it estimates KL(other || sampler): the arguments are read in the other order"),
    ]
    for answer, cause in wrong:
        if matches(value, answer, tol):
            return cause + "; if the candidate's first argument is the other distribution, declare " \
                           "RLSPEC_CONVENTIONS['kl_estimate_arguments'] = 'other, sampler'"
    return ""


def known_logs():
    """The KL known answer's (log p, log q)."""
    x = KNOWN["k1"].arrays()
    return x["logp_sampler"], x["logp_other"]


# ---------------------------------------------------------------------------------------------
# unbiasedness and the per-sample formulas


def unbiased_check(ctx, kind: str):
    log_p, log_q = known_logs()
    known = KNOWN[kind]
    mean, tol = check_expectation(ctx, kind, log_p, log_q, kl_divergence, what=f"E_p[{kind}] at the KL known answer vs KL(p || q)")
    published = known.value(EXPECTATION)
    assert_close(mean, published, tol + known.published_error(EXPECTATION),
                 what=f"E_p[{kind}] at the KL known answer vs the published {published}")
    estimates, call, a, b = check_per_sample(ctx, kind, log_p, log_q, what=" at the KL known answer")
    assert_close(estimates, known.value("estimates"), known.published_error("estimates") + per_sample_tolerance(kind, a, b, call.unit_roundoff),
                 what=f"{kind} per sample at the KL known answer vs the published values", call=call.code)

    def verify(pair):
        estimates, call, a, b = check_per_sample(ctx, kind, *pair)
        mean, tol = math.fsum(np.exp(a) * estimates), expectation_tolerance(kind, a, b, estimates, call.unit_roundoff)
        assert_close(mean, kl_divergence(a, b), tol, what=f"E_p[{kind}] over every outcome vs KL(p || q)" + order_note(ctx),
                     call=call.code, diagnose=lambda v: _diagnose_direction(float(v), tol, a, b))

    ctx.property(draws.categorical_pairs(), verify, label="drawn")


def estimate_kinds(ctx, *needed: str) -> tuple[str, ...]:
    """The kinds the candidate provides (kl_estimate_kinds), narrowed to ``needed`` when given: a library
    without k2 (TRL) is judged on what it has; a clause about a kind it lacks is not-provided."""
    return ctx.provided("kl_estimate_kinds", *needed)


@check("KL-K1-UNBIASED")
def k1_unbiased(ctx):
    """k1 = logp_sampler - logp_other per sample; E_p[k1] = KL(p || q) exactly (0.2332113 at the KL known answer)."""
    estimate_kinds(ctx, "k1")
    unbiased_check(ctx, "k1")


@check("KL-K3-UNBIASED")
def k3_unbiased(ctx):
    """k3 = r - 1 - log r per sample; E_p[k3] = KL(p || q) exactly (0.2332113 at the KL known answer)."""
    estimate_kinds(ctx, "k3")
    unbiased_check(ctx, "k3")


@check("KL-K2-SECOND-ORDER")
def k2_second_order(ctx):
    """k2 = (log r)^2 / 2 per sample; E_p[k2] = 0.2703566 at the KL known answer (biased), = sum p x^2 / 2 on drawn pairs."""
    estimate_kinds(ctx, "k2")
    log_p, log_q = known_logs()
    estimates, call, a, b = check_per_sample(ctx, "k2", log_p, log_q, what=" at the KL known answer",
                                             cause="k2 is not (log r)^2 / 2 (the factor 1/2 missing, or another estimator returned)")
    known, unbiased = KNOWN["k2"], KNOWN["k1"].value(EXPECTATION)
    assert_close(estimates, known.value("estimates"), known.published_error("estimates") + per_sample_tolerance("k2", a, b, call.unit_roundoff),
                 what="k2 per sample at the KL known answer vs the published values", call=call.code)
    mean = math.fsum(np.exp(a) * estimates)
    tol = expectation_tolerance("k2", a, b, estimates, call.unit_roundoff) + known.published_error(EXPECTATION)
    assert_close(mean, known.value(EXPECTATION), tol,
                 what=f"E_p[k2] at the KL known answer vs {known.value(EXPECTATION)} (biased: KL(p || q) = {unbiased})", call=call.code,
                 diagnose=lambda v: "E[k2] equals KL(p || q): another (unbiased) estimator is returned for kind 'k2'"
                 if matches(v, unbiased, tol) else "")
    # Near r = 1, where k2 agrees with KL to second order: log ratios of 1e-3 and below.
    check_per_sample(ctx, "k2", np.full(4, -1.5), -1.5 + np.array([1e-3, -1e-3, 2.0**-20, 0.0]), what=" near r = 1")

    def verify(pair):
        estimates, call, a, b = check_per_sample(ctx, "k2", *pair)
        assert_close(math.fsum(np.exp(a) * estimates), math.fsum(np.exp(a) * 0.5 * (b - a) ** 2),
                     expectation_tolerance("k2", a, b, estimates, call.unit_roundoff),
                     what="E_p[k2] over every outcome vs sum p (log r)^2 / 2" + order_note(ctx), call=call.code)

    ctx.property(draws.categorical_pairs(), verify, label="drawn")


# ---------------------------------------------------------------------------------------------
# non-negativity and direction

NONNEGATIVE_LOG_RATIOS = np.array([-30.0, -5.0, -1.0, -0.01, -1e-6, -1e-12, 0.0, 1e-12, 1e-6, 0.01, 1.0, 5.0, 30.0])


@check("KL-K3-NONNEGATIVE")
def k3_nonnegative(ctx):
    """k3 >= -tol on every sample, == 0 exactly where logp_sampler == logp_other, > 0 where k3 is clearly positive."""
    estimate_kinds(ctx, "k3")

    def verify(logp_sampler, logp_other):
        estimates, call, a, b = run_kl(ctx, logp_sampler, logp_other, "k3")
        tol = per_sample_tolerance("k3", a, b, call.unit_roundoff)
        assert_close(np.minimum(estimates, 0.0), np.zeros_like(estimates), tol, what="negative part of k3 per sample (k3 >= 0)",
                     call=call.code)
        equal = a == b
        assert_close(np.where(equal, estimates, 0.0), np.zeros_like(estimates), 0.0,
                     what="k3 where logp_sampler == logp_other (r = 1: exactly 0)", call=call.code)
        clearly = exact("k3", a, b) > tol
        if np.any(clearly & ~(estimates > 0)):
            i = int(np.flatnonzero(clearly & ~(estimates > 0))[0])
            raise ClauseFailure(f"k3 per sample: expected > 0 at index {i} (log r = {b[i] - a[i]:.6g}, exact k3 "
                                f"{exact('k3', a, b)[i]:.6g}), got {estimates[i]:.6g}", call=call.code)

    base = np.full(len(NONNEGATIVE_LOG_RATIOS), -2.0)
    verify(base, base + NONNEGATIVE_LOG_RATIOS)
    verify(base - 0.5, base + NONNEGATIVE_LOG_RATIOS)  # the same ratios shifted by 0.5: none is 1
    verify(*known_logs())
    ctx.property(draws.categorical_pairs(), lambda pair: verify(*pair), label="drawn")


@check("KL-DIRECTION")
def direction(ctx):
    """E_p[k(p, q)] = KL(p || q) and, arguments swapped, E_q[k(q, p)] = KL(q || p) (0.2332 vs 0.2091 at the KL known answer)."""
    kinds = estimate_kinds(ctx, "k1", "k3")
    for kind in kinds:
        there, back = KNOWN[kind], REVERSED[kind]
        log_p, log_q = there.arrays()["logp_sampler"], there.arrays()["logp_other"]
        forward, tol_f = check_expectation(ctx, kind, log_p, log_q, kl_divergence,
                                           what=f"E_p[{kind}(sampler p, other q)] at the KL known answer vs KL(p || q) = "
                                                f"{kl_divergence(log_p, log_q):.7f}")
        backward, tol_b = check_expectation(ctx, kind, back.arrays()["logp_sampler"], back.arrays()["logp_other"], kl_divergence,
                                            what=f"E_q[{kind}(sampler q, other p)] at the KL known answer vs KL(q || p) = "
                                                 f"{kl_divergence(log_q, log_p):.7f}")
        published = [there.value(EXPECTATION), back.value(EXPECTATION)]
        assert_close([forward, backward], published,
                     [tol_f + there.published_error(EXPECTATION), tol_b + back.published_error(EXPECTATION)],
                     what=f"E[{kind}] both ways at the KL known answer vs the published {published[0]} and {published[1]}")

    def verify(drawn):
        (log_p, log_q), kind = drawn
        check_expectation(ctx, kind, log_p, log_q, kl_divergence, what=f"E_p[{kind}] vs KL(p || q)")
        check_expectation(ctx, kind, log_q, log_p, kl_divergence, what=f"E_q[{kind}], arguments swapped, vs KL(q || p)")

    ctx.property(st.tuples(draws.categorical_pairs(), st.sampled_from(kinds)), verify, label="drawn")


# ---------------------------------------------------------------------------------------------
# extreme log ratios

EXTREME_LOG_RATIOS = np.array([-30.0, -20.5, -11.0, -3.0, 3.0, 11.0, 20.5, 30.0])


@check("KL-EXTREME-LOG-RATIO")
def extreme_log_ratio(ctx):
    """|log r| up to 30 (and log-probabilities near -1000): every kind exact, finite and unclamped."""
    kinds = estimate_kinds(ctx)

    def verify(logp_sampler, logp_other, kinds=kinds):
        for kind in kinds:
            estimates, call, a, b = run_kl(ctx, logp_sampler, logp_other, kind, allow_nonfinite=True)
            bad = ~np.isfinite(estimates)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ClauseFailure(f"{kind} per sample: {estimates[i]} at index {i} on finite input "
                                    f"(logp_sampler = {a[i]!r}, logp_other = {b[i]!r}, log r = {b[i] - a[i]:.6g})",
                                    call=call.code, cause="overflow: the ratio is not formed in log space")
            expected = exact(kind, a, b)
            tol = per_sample_tolerance(kind, a, b, call.unit_roundoff)
            clamped = np.abs(estimates - expected) > tol
            cause = ""
            if clamped.any() and np.any(np.abs(estimates[clamped]) <= 20.5 * (1 + 1e-6)):
                cause = "the estimate or the log ratio is clamped: large divergences are biased low (and get no gradient)"
            assert_close(estimates, expected, tol, what=f"{kind} per sample at |log r| up to 30" + order_note(ctx),
                         call=call.code, cause=cause)

    n = len(EXTREME_LOG_RATIOS)
    verify(np.full(n, -0.25), -0.25 + EXTREME_LOG_RATIOS)
    verify(np.full(n, -1000.0), -1000.0 + EXTREME_LOG_RATIOS)
    verify(-1000.0 - EXTREME_LOG_RATIOS, np.full(n, -1000.0))
    ctx.property(draws.extreme_cases(kinds=kinds), lambda drawn: verify(*drawn), label="drawn")


# ---------------------------------------------------------------------------------------------
# the adaptive KL-penalty coefficient

def adaptive_conventions(ctx) -> tuple[float, float]:
    """kl_adaptive_factor and kl_adaptive_threshold (both > 1, validated at load)."""
    return float(ctx.convention("kl_adaptive_factor")), float(ctx.convention("kl_adaptive_threshold"))


def _as_array(result):
    """A Python or NumPy scalar as a 0-d array (a NumPy float keeps its precision); anything else unchanged."""
    if isinstance(result, (bool, np.bool_)):
        return result
    if isinstance(result, np.floating):
        return np.asarray(result)
    if isinstance(result, (int, float, np.integer)):
        return np.asarray(float(result))
    return result


def run_update(ctx, beta: float, kl: float, target: float) -> tuple[float, Call]:
    """Call kl_coefficient_update with Python floats; a scalar result is accepted (wrapped as a 0-d array)."""
    function = ctx.candidate.operations["kl_coefficient_update"]
    candidate = ctx.candidate
    ctx.candidate = dataclasses.replace(candidate, operations={
        **candidate.operations, "kl_coefficient_update": lambda **kw: _as_array(function(**kw))})
    try:
        call = ctx.call("kl_coefficient_update", {"beta": beta, "kl": kl, "target": target}, shape=(),
                        dtype=np.float64, record=False)
    finally:
        ctx.candidate = candidate
    if call.unit_roundoff > U64:  # as Context.call notes it
        note = f"judged at the precision of its output ({', '.join(sorted(set(call.output_dtypes)))})"
        if note not in ctx.notes:
            ctx.notes.append(note)
    return float(call.outputs[0]), call


def expected_update(beta: float, kl: float, target: float, factor: float, threshold: float) -> float:
    """The rule in exact rational arithmetic (the inputs are floats, so Fraction holds them exactly)."""
    kl_, target_, c = Fraction(kl), Fraction(target), Fraction(threshold)
    if kl_ > c * target_:
        return beta * factor
    if kl_ < target_ / c:
        return beta / factor
    return beta


def update_tolerance(expected: float, factor: float, call) -> float:
    """In float64, multiplying or dividing by a power of two is exact: tolerance 0. Another factor costs
    one rounding of the result, plus one if the candidate forms 1 / factor first. An output in a
    coarser precision (u > 2^-53) may also round beta itself once."""
    u = call.unit_roundoff
    exact_scaling = math.frexp(factor)[0] == 0.5
    return ((0.0 if exact_scaling else 2 * u) + (u if u > U64 else 0.0)) * abs(expected)


def boundary_is_exact(target: float, threshold: float) -> bool:
    """Whether threshold * target and target / threshold are floats. Then at kl = c t (or t / c) every way
    of writing the comparison (kl > c t, kl / t > c, t / kl < 1 / c, kl c < t) rounds to the same
    decision, because each side is the correctly rounded value of the same real number."""
    c, t = Fraction(threshold), Fraction(target)
    return float(c * t) == c * t and float(t / c) == t / c


@check("KL-ADAPTIVE-PENALTY")
def adaptive_penalty(ctx):
    """beta doubles above 1.5 target, halves below target / 1.5, stays otherwise (strict; declared factor/threshold)."""
    factor, threshold = adaptive_conventions(ctx)

    def verify(beta, kl, target, note=""):
        value, call = run_update(ctx, beta, kl, target)
        expected = expected_update(beta, kl, target, factor, threshold)
        rule = {beta * factor: f"x {factor:g}", beta / factor: f"/ {factor:g}", beta: "unchanged"}.get(expected, "")
        cause = ""
        if matches(value, beta / factor, 0.0) and expected == beta * factor or matches(value, beta * factor, 0.0) and expected == beta / factor:
            cause = "the update runs the wrong way: beta must grow when the KL is too large"
        elif matches(value, beta / factor, 0.0) and expected == beta:
            cause = f"beta shrinks although kl >= target / {threshold:g}: a threshold is off (target instead of target / {threshold:g}?)"
        assert_close(value, expected, update_tolerance(expected, factor, call),
                     what=f"beta after kl = {kl!r}, target = {target!r} (expected {rule}){note}", call=call.code, cause=cause)

    target = 0.01171875  # 3 * 2^-8: 1.5 target = 0.017578125 and target / 1.5 = 2^-7 are exact
    for kl, beta in ((0.0, 0.5), (0.5 * target, 1.0), (0.8 * target, 0.25), (target, 0.5), (1.25 * target, 3.0),
                     (1.6 * target, 0.5), (10.0 * target, 1e-3), (1e3, 8.0)):
        verify(beta, kl, target)
    for args, label in edges.cases("kl_coefficient_update", {"beta": 0.5, "kl": 0.02, "target": 0.01171875}):
        verify(args["beta"], args["kl"], args["target"], note=f" ({label})")
    if boundary_is_exact(target, threshold):
        verify(0.5, threshold * target, target, note=" (exactly at threshold x target: strict, unchanged)")
        verify(0.5, target / threshold, target, note=" (exactly at target / threshold: strict, unchanged)")

    def drawn(update):
        beta, kl, target = update
        # Near a threshold the forms kl > c t and kl / t > c (in float64, or in float32 if the candidate
        # converts) may round differently: skip draws within a few float32 roundings of either edge.
        for edge in (threshold * target, target / threshold):
            if abs(kl - edge) <= 8 * 2.0**-24 * (kl + edge):
                return
        verify(beta, kl, target)

    ctx.property(draws.coefficient_updates(), drawn, label="drawn")

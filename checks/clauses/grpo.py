"""Checks for the GRPO chapter (``spec/clauses/85_grpo.toml``): group-relative advantages and the
per-token KL penalty used as a loss.

Every check starts from fixed known-answer inputs (the libraries' documented examples, the bug
catalogue's smallest inputs), the same on every seed, then searches drawn inputs.

group_advantages. Expected values come from the formulas evaluated with the group statistics in
exact rational arithmetic (the scores are floats, so ``Fraction`` holds them exactly); only the
square root and the final division round. Group ids reach the candidate as integers in its own
array kind (the suite's conversion would make them floats).

kl_penalty. The operation's meaning is a gradient, so it is always called with torch tensors and
``logp`` a leaf that requires grad. Expected gradients are exact expectations: the candidate gets
every outcome y of a categorical at once (one token each), the loss is sum_y s(y) kl(y) with the
sampling probabilities s held fixed (pi on-policy, pi_old off-policy), and its gradient with respect
to the logits theta of pi = softmax(theta) is d loss / d theta_b = v_b - pi_b sum_y v_y, with
v = d loss / d logp (the chain rule through log-softmax, d log pi_y / d theta_b = [y = b] - pi_b).
It is compared with the closed forms grad KL(pi || pi_ref)_b = pi_b (l_b - sum_y pi_y l_y),
l = log pi - log pi_ref, and grad KL(pi_ref || pi) = pi - pi_ref. ``logp_old`` is passed only for
tokens drawn off-policy. The value and expected-gradient clauses draw log ratios within MODERATE = 2.5
(below every clamp a library applies); clamps, overflow and cancellation are judged by
KL-PENALTY-EXTREME-LOG-RATIO, whose failure names, kind by kind, the ratio pi_ref / pi where the
candidate starts to deviate (found by bisection).

Conventions (group_std_ddof, group_std_eps, group_singleton, group_unscorable, kl_penalty_off_policy,
kl_penalty_kinds) are the contract's (spec/contract/85_grpo.toml), each checked exactly.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch
from hypothesis import strategies as st

from ..kit import kl_estimators
from ..kit.context import format_call
from ..kit.assertions import ClauseFailure, assert_close, matches
from ..kit.kl_estimators import ELEMENTARY
from ..kit.context import CandidateError
from ..kit.registry import check
from ..kit.strategies import groups as draws
from ..kit.strategies import rounded
from ..kit.strategies.groups import GROUP_KINDS, MODERATE  # noqa: F401 - MODERATE: the bound the module docstring names
from ..kit.tolerances import TINY, U64, smallest_normal
from ...spec import contract

KL_KINDS = contract.convention("kl_penalty_kinds").allowed

# ---------------------------------------------------------------------------------------------
# group_advantages: conventions


@dataclass(frozen=True)
class GroupConventions:
    """The oracle's parameters: the declared group_std_ddof, group_std_eps, group_singleton and
    group_unscorable (spec/contract/85_grpo.toml), or others for a diagnosis."""

    ddof: int = contract.convention("group_std_ddof").default
    eps: float = contract.convention("group_std_eps").default
    singleton: str | tuple = contract.convention("group_singleton").default  # one value, or ((kind, value), ...) by kind
    unscorable: str = contract.convention("group_unscorable").default

    def singleton_for(self, kind: str) -> str:
        return contract.convention("group_singleton").by_kind(self.singleton, kind)


def group_conventions(ctx) -> GroupConventions:
    return GroupConventions(int(ctx.convention("group_std_ddof")), float(ctx.convention("group_std_eps")),
                            ctx.convention("group_singleton"), ctx.convention("group_unscorable"))


def describe_conventions(conv: GroupConventions) -> str:
    return f"ddof {conv.ddof}, eps {conv.eps:g}"


# ---------------------------------------------------------------------------------------------
# group_advantages: the oracle and its tolerance


def _members(scores, groups):
    """``(group id, indices of its scorable members)`` for every group, in order of first appearance."""
    scorable = ~np.isnan(scores)
    seen = dict.fromkeys(groups.tolist())
    return [(g, np.flatnonzero((groups == g) & scorable)) for g in seen]


def expected_advantages(scores, groups, kind, conv: GroupConventions) -> np.ndarray:
    """The declared advantages in float64; group means and variances in exact rational arithmetic."""
    scores = np.asarray(scores, dtype=np.float64)
    out = np.where(np.isnan(scores), np.nan if conv.unscorable == "nan" else 0.0, 0.0)
    for _, idx in _members(scores, np.asarray(groups)):
        n = len(idx)
        if n == 0:
            continue
        r = [Fraction(float(v)) for v in scores[idx]]
        if n == 1:
            if conv.singleton_for(kind) == "score":
                out[idx] = float(r[0]) / (1.0 + conv.eps) if kind == "grpo" else float(r[0])
            continue
        mean = sum(r) / n
        centred = [ri - mean for ri in r]
        if kind == "mean":
            out[idx] = [float(c) for c in centred]
        elif kind == "rloo":
            out[idx] = [float(c * n / (n - 1)) for c in centred]  # r_i - (sum - r_i) / (n - 1)
        else:
            std = math.sqrt(float(sum(c * c for c in centred) / (n - conv.ddof)))
            out[idx] = [float(c) / (std + conv.eps) for c in centred]
    return out


def group_tolerance(scores, groups, kind, conv: GroupConventions, u) -> np.ndarray:
    """Per-sample bound on |computed - exact|, first order in u, for any summation order.

    In a group of n scorable scores with M = max |r|: the mean is off by at most n u M and each
    centred value c_i = r_i - m by e_c = (n + 2) u M. "mean": e_c + u |A|. "rloo" in any of its forms
    (r_i - (S - r_i) / (n - 1), (n r_i - S) / (n - 1), n / (n - 1) c_i): 2 (n + 2) u M + 3 u |A|.
    "grpo": the sum of squares of the computed c is off by sum (2 |c| e_c + e_c^2) + (n + 2) u sum c^2,
    the variance by that over n - ddof (d_var); the std by min(d_var / s, sqrt(d_var)) + u s (a square
    root: |sqrt(v + d) - sqrt(v)| <= min(|d| / sqrt(v), sqrt(|d|))); D = s + eps by d_D = d_s + 2 u D
    (the sum, and eps itself rounded); A = c / D by e_c / D + |A| (d_D / D + u). Below the smallest
    normal eta each of the few roundings may lose eta. The oracle rounds only its square root and
    division, but the tolerance is still twice the bound.
    """
    scores = np.asarray(scores, dtype=np.float64)
    tol = np.zeros(len(scores))
    eta = smallest_normal(u)
    expected = expected_advantages(scores, groups, kind, conv)
    for _, idx in _members(scores, np.asarray(groups)):
        n = len(idx)
        if n == 0:
            continue
        r = scores[idx]
        M = float(np.max(np.abs(r)))
        e_c = (n + 2) * u * M + 4 * eta
        A = np.abs(expected[idx])
        if n == 1:
            # "score": r / (1 + eps), two roundings; "zero": r - r, exact
            bound = 3 * u * A + 4 * eta
        elif kind == "mean":
            bound = e_c + u * A
        elif kind == "rloo":
            bound = 2 * (n + 2) * u * M + 3 * u * A + 8 * eta
        else:
            exact_mean = float(sum(Fraction(float(v)) for v in r) / n)
            c = np.abs(r - exact_mean)
            ss = float(np.sum(c**2))
            dof = n - conv.ddof
            s = math.sqrt(ss / dof)
            d_var = (float(np.sum(2 * c * e_c + e_c**2)) + (n + 2) * u * ss) / dof
            d_s = (min(d_var / s, math.sqrt(d_var)) if s > 0 else math.sqrt(d_var)) + u * s
            D = s + conv.eps
            d_D = d_s + 2 * u * D
            bound = e_c / D + A * (d_D / D + u)
        tol[idx] = 2 * bound
    return tol + TINY


# ---------------------------------------------------------------------------------------------
# group_advantages: calling the candidate with integer ids


def _integer_ids(groups, candidate):
    if candidate.array == "torch":
        return groups.long()
    if candidate.array == "jax":
        import jax.numpy as jnp

        return jnp.asarray(groups).astype(jnp.int32)
    return np.asarray(groups).astype(np.int64)


def run_groups(ctx, scores, groups, kind, *, allow_nonfinite=False):
    """The candidate's advantages (float64), the call, and the scores as the candidate received them."""
    scores = rounded(scores, ctx.dtype)
    groups = np.asarray(groups, dtype=np.int64)
    function = ctx.candidate.operations["group_advantages"]
    candidate = ctx.candidate

    def with_integer_ids(scores, groups, kind):
        return function(scores=scores, groups=_integer_ids(groups, candidate), kind=kind)

    ctx.candidate = dataclasses.replace(candidate, operations={**candidate.operations, "group_advantages": with_integer_ids})
    try:
        call = ctx.call("group_advantages", {"scores": scores, "groups": groups.astype(np.float64), "kind": kind},
                        shape=scores.shape, allow_nonfinite=allow_nonfinite)
    finally:
        ctx.candidate = candidate
    call.code = format_call("group_advantages", {"scores": scores.astype(ctx.dtype), "groups": groups, "kind": kind})
    return call.outputs[0], call, scores


def _close_with_nans(actual, expected, tol, **kwargs):
    """assert_close where an expected NaN must be a NaN (and is then not compared further)."""
    nan = np.isnan(expected)
    if np.any(nan & ~np.isnan(actual)):
        i = int(np.flatnonzero(nan & ~np.isnan(actual))[0])
        raise ClauseFailure(f"{kwargs['what']}: expected nan at index {i} (declared group_unscorable = 'nan'), got {actual[i]:.10g}",
                            call=kwargs.get("call", ""), cause="the unscorable sample's advantage is not the declared NaN")
    assert_close(np.where(nan, 0.0, actual), np.where(nan, 0.0, expected), tol, **kwargs)


def _alternatives(scores, groups, kind, conv: GroupConventions):
    """Known wrong answers for these inputs, each with the mistake it reveals."""
    found = []
    other_ddof = dataclasses.replace(conv, ddof=1 - conv.ddof)
    if kind == "grpo":
        found.append((expected_advantages(scores, groups, kind, other_ddof), other_ddof,
                      f"the std has ddof {1 - conv.ddof}, but the candidate declares group_std_ddof = {conv.ddof}"
                      + (" (np.std's default is ddof 0; torch.std's is 1)" if conv.ddof == 1 else "")))
        for eps in (1e-4, 1e-6, 1e-8, 1e-9):
            if eps != conv.eps:
                alt = dataclasses.replace(conv, eps=eps)
                found.append((expected_advantages(scores, groups, kind, alt), alt,
                              f"the epsilon is {eps:g}, but the candidate declares group_std_eps = {conv.eps:g}"))
        found.append((expected_advantages(scores, groups, "mean", conv), conv,
                      "the advantages are not divided by the group std (kind 'grpo' computed as 'mean')"))
    if kind == "grpo" and len(_members(scores, np.asarray(groups))) > 1:
        for alternative, reason in _batch_wide(scores, groups, conv):
            found.append((alternative, conv, reason))
    if kind == "mean":
        found.append((expected_advantages(scores, groups, "grpo", conv), conv,
                      "kind 'mean' is divided by the group std as well (the kind is ignored, computed as 'grpo')"))
    if kind == "rloo":
        found.append((expected_advantages(scores, groups, "mean", conv), conv,
                      "the leave-one-out baseline includes the sample itself: r - group mean instead of r - mean of the others"))
    if conv.singleton_for(kind) == "zero":
        alt = dataclasses.replace(conv, singleton="score")
        found.append((expected_advantages(scores, groups, kind, alt), alt,
                      f"a singleton group is normalised with mean 0 and std 1 (verl): declare group_singleton = 'score' "
                      f"(or {{{kind!r}: 'score'}})"))
    else:
        alt = dataclasses.replace(conv, singleton="zero")
        found.append((expected_advantages(scores, groups, kind, alt), alt,
                      f"a singleton group gets 0, but the candidate declares group_singleton = 'score' for kind {kind!r}"))
    if np.any(np.isnan(scores)):
        zeroed = np.nan_to_num(scores, nan=0.0)
        found.append((expected_advantages(zeroed, groups, kind, conv), conv,
                      "unscorable (NaN) scores count as 0 in the group statistics: they must be left out"))
    k = len(set(np.asarray(groups).tolist()))
    if len(scores) % k == 0:
        contiguous = np.repeat(np.arange(k), len(scores) // k)
        if not np.array_equal(contiguous, np.asarray(groups)):
            found.append((expected_advantages(scores, contiguous, kind, conv), conv,
                          f"the batch is grouped by position (reshape into {k} contiguous groups of {len(scores) // k}), not by id"))
    return found


def _batch_wide(scores, groups, conv: GroupConventions):
    """'grpo' with batch statistics: the batch's std with the group mean (TRL scale_rewards='batch'), and the
    batch's mean and std (bug G6, grpo-flat #2)."""
    scorable = ~np.isnan(scores)
    r = scores[scorable]
    if len(r) < 2:
        return []
    std = float(np.std(r, ddof=conv.ddof))
    group_mean = np.zeros(len(scores))
    for _, idx in _members(scores, np.asarray(groups)):
        if len(idx):
            group_mean[idx] = np.mean(scores[idx])
    fill = np.nan if conv.unscorable == "nan" else 0.0
    return [
        (np.where(scorable, (scores - group_mean) / (std + conv.eps), fill),
         "the std is the whole batch's, not the group's (TRL scale_rewards='batch')"),
        (np.where(scorable, (scores - float(np.mean(r))) / (std + conv.eps), fill),
         "the mean and the std are the whole batch's, not the group's (bug G6)"),
    ]


def check_groups(ctx, scores, groups, kind, *, what, cause=""):
    conv = group_conventions(ctx)
    nan_out = conv.unscorable == "nan" and bool(np.any(np.isnan(np.asarray(scores, dtype=np.float64))))
    actual, call, x = run_groups(ctx, scores, groups, kind, allow_nonfinite=True)
    u = call.unit_roundoff
    expected = expected_advantages(x, groups, kind, conv)
    tol = group_tolerance(x, groups, kind, conv, u)
    if not nan_out and not np.all(np.isfinite(actual)):
        i = int(np.flatnonzero(~np.isfinite(actual))[0])
        raise ClauseFailure(f"{what}: group_advantages returned {actual[i]} at index {i} (expected {expected[i]:.10g})",
                            call=call.code,
                            cause="a NaN or inf from 0 / 0: a group with identical scores or one member divided by a zero "
                            "std, or a NaN score poisoning its group's statistics")

    def diagnose(values):
        for alternative, alt_conv, reason in _alternatives(x, groups, kind, conv):
            alt_tol = group_tolerance(x, groups, kind, alt_conv, u)
            same = np.isnan(alternative) & np.isnan(values)
            distinct = ~(np.abs(alternative - expected) <= alt_tol) & ~(np.isnan(alternative) & np.isnan(expected))
            if np.all(same | (np.abs(values - alternative) <= alt_tol)) and distinct.any():
                return reason
        return ""

    _close_with_nans(actual, expected, tol, what=f"{what}: kind {kind!r} ({describe_conventions(conv)})", call=call.code,
                     cause=cause, diagnose=diagnose)
    return actual, call


# ---------------------------------------------------------------------------------------------
# group_advantages: known answers (spec/contract/85_grpo.toml) and fixed inputs


def known_scores(answer_id: str) -> tuple[list, list]:
    """A known answer's ``(scores, groups)``."""
    x = contract.known_answer(answer_id).inputs
    return x["scores"], x["groups"]


# verl: [1, 0, 0, 1 | 0.5 | 2] with ids [a, a, a, a, b, c]; TRL's group [0, 0, 0, 1].
VERL_SCORES, VERL_GROUPS = known_scores("grpo.verl-singletons")
PAIR = known_scores("grpo.pair-grpo")
RLOO_TWO = known_scores("grpo.rloo-two")
TRL_EIGHT = ([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], [0, 0, 0, 0, 1, 1, 1, 1])
G8_SCORES, G8_GROUPS = known_scores("grpo.g8")
G9 = known_scores("grpo.g9")
UNSCORABLE = known_scores("grpo.unscorable")  # TRL's probe
INTERLEAVED = ([3.0, 0.0, 1.0, 10.0, 2.0, -4.0, 5.0], [42, 7, 42, 9, 7, 9, 42])  # sizes 3, 2, 2; ids not 0..k-1


@check("GROUP-GRPO-VALUES")
def grpo_values(ctx):
    """(r - m) / (s + eps), declared ddof / eps: [1, 0, 0, 1], TRL's eight, G9's near-tie, then drawn groups."""
    cause = "the std's ddof or the epsilon differs from the declaration, or eps enters inside the square root"
    for scores, groups in (PAIR, TRL_EIGHT, G9, ([1.0, 0.0], [5, 5]), INTERLEAVED):
        check_groups(ctx, scores, groups, "grpo", what=f"scores {scores}", cause=cause)
    ctx.property(draws.grouped_scores(), lambda d: check_groups(ctx, *d, "grpo", what="drawn groups", cause=cause),
                 label="drawn", tier="grouped")


@check("GROUP-MEAN-VALUES")
def mean_values(ctx):
    """r - group mean: [1, 0, 0, 1] -> [0.5, -0.5, -0.5, 0.5], then drawn groups."""
    cause = "kind 'mean' must not divide by the std"
    for scores, groups in (PAIR, TRL_EIGHT, INTERLEAVED):
        check_groups(ctx, scores, groups, "mean", what=f"scores {scores}", cause=cause)
    ctx.property(draws.grouped_scores(), lambda d: check_groups(ctx, *d, "mean", what="drawn groups", cause=cause),
                 label="drawn", tier="grouped")


@check("GROUP-RLOO-LEAVE-ONE-OUT")
def rloo_values(ctx):
    """r - mean of the others: [1, 0, 0, 1] -> +-2/3, [1, 0] -> +-1, then drawn groups."""
    cause = "the baseline must leave the sample itself out: (sum - r) / (n - 1)"
    for scores, groups in (PAIR, RLOO_TWO, ([1.0, 0.0, 0.0, 0.0], [1, 1, 1, 1]), INTERLEAVED):
        check_groups(ctx, scores, groups, "rloo", what=f"scores {scores}", cause=cause)
    ctx.property(draws.grouped_scores(), lambda d: check_groups(ctx, *d, "rloo", what="drawn groups", cause=cause),
                 label="drawn", tier="grouped")


@check("GROUP-UNSORTED-IDS")
def unsorted_ids(ctx):
    """Interleaved ids of unequal groups; a permuted batch gives permuted advantages (every kind)."""
    cause = "groups must be formed by id, not by position"
    for kind in GROUP_KINDS:
        check_groups(ctx, *INTERLEAVED, kind, what="interleaved ids [42, 7, 42, 9, 7, 9, 42]", cause=cause)
        # equal sizes, interleaved: a reshape by group size gets the sizes right and the members wrong
        check_groups(ctx, [1.0, 5.0, 2.0, 7.0, 0.0, 9.0], [3, 8, 3, 8, 3, 8], kind, what="alternating ids", cause=cause)

    def verify(drawn):
        (scores, groups), kind, seed = drawn
        first, _ = check_groups(ctx, scores, groups, kind, what="drawn groups", cause=cause)
        order = np.random.default_rng(seed).permutation(len(scores))
        again, call = check_groups(ctx, scores[order], groups[order], kind, what="the same batch permuted", cause=cause)
        assert_close(again, first[order], group_tolerance(scores[order], groups[order], kind, group_conventions(ctx), call.unit_roundoff),
                     what="advantages of the permuted batch vs the original's, permuted", call=call.code, cause=cause)

    ctx.property(st.tuples(draws.grouped_scores(max_groups=5), st.sampled_from(GROUP_KINDS), st.integers(0, 2**32 - 1)),
                 verify, label="drawn", tier="grouped")


@check("GROUP-IDENTICAL-SCORES")
def identical_scores(ctx):
    """Identical scores in a group: zeros (finite, within rounding) for every kind."""
    cause = "a group with identical scores must give 0: the std needs its epsilon (0 / 0 is NaN)"
    cases = [([1.0] * 4, [0] * 4), ([0.1] * 3, [2] * 3), ([0.0, 0.0], [1, 1]), ([1e6] * 5, [4] * 5),
             ([1.0, 1.0, 0.3, 0.3, 0.3], [0, 0, 1, 1, 1])]
    for scores, groups in cases:
        for kind in GROUP_KINDS:
            check_groups(ctx, scores, groups, kind, what=f"identical scores {scores}", cause=cause)

    ctx.property(draws.constant_groups(kinds=GROUP_KINDS), lambda d: check_groups(ctx, d[0], d[1], d[2], what="identical scores", cause=cause),
                 label="drawn", tier="grouped")


@check("GROUP-LOW-VARIANCE")
def low_variance(ctx):
    """G8: [1.0, 1.00001, 2.0, 2.00001] in two groups -> +-0.6195 (eps 1e-6); G9's near-tie; drawn small spreads."""
    cause = "the variance is floored or formed as E[r^2] - E[r]^2: a small spread is lost"
    check_groups(ctx, G8_SCORES, G8_GROUPS, "grpo", what="G8 scores [1.0, 1.00001, 2.0, 2.00001]", cause=cause)
    check_groups(ctx, *G9, "grpo", what="G9 scores [1, 1, 1, 1 + 1e-5]", cause=cause)

    # float32 cannot hold 1 + 1e-5 apart from 1 well enough for a spread this small to be drawn
    ctx.property(draws.near_ties(), lambda d: check_groups(ctx, *d, "grpo", what="near-identical scores", cause=cause),
                 label="drawn", tier="grouped")


@check("GROUP-SINGLETON")
def singleton(ctx):
    """verl's [1, 0, 0, 1 | 0.5 | 2]: the singletons b, c get the declared advantage, never NaN (every kind)."""
    conv = group_conventions(ctx)
    declared = conv.singleton if isinstance(conv.singleton, str) else dict(conv.singleton)
    cause = f"a group with one scorable member must get the declared group_singleton = {declared!r}"
    for kind in GROUP_KINDS:
        check_groups(ctx, VERL_SCORES, VERL_GROUPS, kind, what="verl's [1, 0, 0, 1, 0.5, 2], ids [a, a, a, a, b, c]", cause=cause)
        check_groups(ctx, [3.0], [0], kind, what="one sample", cause=cause)
        check_groups(ctx, [-2.0, 1.0, 4.0], [5, 6, 5], kind, what="ids [5, 6, 5]", cause=cause)

    ctx.property(draws.small_groups(kinds=GROUP_KINDS), lambda d: check_groups(ctx, *d[:2], d[2], what="drawn groups of 1 to 3", cause=cause),
                 label="drawn", tier="grouped")


@check("GROUP-UNSCORABLE-EXCLUDED")
def unscorable_excluded(ctx):
    """NaN scores are left out of their group's statistics and get the declared advantage (TRL: 0)."""
    cause = "NaN scores must be left out of the group statistics (not counted as 0, not propagated)"
    cases = [UNSCORABLE,  # TRL's probe
             ([math.nan, 2.0, 0.0, math.nan, 1.0, 1.0], [1, 1, 1, 2, 2, 2]),
             ([math.nan, 3.0, 0.5, 0.5], [4, 4, 9, 9]),  # a group reduced to one scorable member
             ([math.nan, math.nan, 1.0, 2.0], [4, 4, 9, 9])]  # a group with none
    for scores, groups in cases:
        for kind in GROUP_KINDS:
            check_groups(ctx, scores, groups, kind, what=f"scores {scores}", cause=cause)

    ctx.property(st.tuples(draws.grouped_scores(nan=True), st.sampled_from(GROUP_KINDS)),
                 lambda d: check_groups(ctx, *d[0], d[1], what="drawn groups with NaN scores", cause=cause),
                 label="drawn", tier="grouped")


# ---------------------------------------------------------------------------------------------
# GROUP-BASELINE-BIAS: the expected policy gradient over every joint outcome of G draws


def joint_outcomes(pi, R, G, rng=None):
    """Every joint outcome of G independent draws from pi: a flat batch of G K^G scores with one
    group id per outcome (ids spread out and the batch shuffled), and each outcome's probability."""
    K = len(pi)
    outcomes = list(itertools.product(range(K), repeat=G))
    probs = np.array([math.prod(pi[a] for a in o) for o in outcomes])
    actions = np.array(outcomes).reshape(-1)
    groups = np.repeat(np.arange(len(outcomes)) * 5 + 2, G)
    order = np.arange(len(actions)) if rng is None else rng.permutation(len(actions))
    return np.asarray(R, dtype=np.float64)[actions][order], groups[order], actions[order], np.repeat(probs, G)[order]


def expected_policy_gradient(advantages, actions, weights, pi):
    """sum over outcomes of P(o) sum_i A_i grad_theta log pi(y_i), with grad log pi(a) = e_a - pi."""
    K = len(pi)
    onehot = np.eye(K)[actions]
    terms = (weights * advantages)[:, None] * (onehot - np.asarray(pi)[None, :])
    return np.array([math.fsum(terms[:, k]) for k in range(K)])


def check_baseline(ctx, pi, R, G, kind, label):
    scores, groups, actions, weights = joint_outcomes(pi, R, G, ctx.rng(f"{label}:{G}:{kind}"))
    conv = group_conventions(ctx)
    actual, call, x = run_groups(ctx, scores, groups, kind)
    u = call.unit_roundoff
    pi = np.asarray(pi, dtype=np.float64)
    J = math.fsum(pi * np.asarray(R))
    grad_J = pi * (rounded(R, ctx.dtype) - math.fsum(pi * rounded(R, ctx.dtype)))  # pi_k (R_k - J)
    factor = G if kind == "rloo" else G - 1
    got = expected_policy_gradient(actual, actions, weights, pi)
    per_sample = group_tolerance(x, groups, kind, conv, u)
    tol = float(np.sum(weights * per_sample)) * 2 + len(x) * U64 * float(np.sum(weights * np.abs(actual))) * 4 + TINY
    form = "G grad J (leave-one-out: unbiased)" if kind == "rloo" else "(G - 1) grad J (group mean: (1 - 1/G) times the unbiased)"

    def diagnose(value):
        other = (G - 1) if kind == "rloo" else G
        if matches(value, other * grad_J, tol) and np.any(np.abs(grad_J) > tol):
            return ("the expected gradient is (G - 1) grad J: the leave-one-out baseline includes the sample itself"
                    if kind == "rloo" else "the expected gradient is G grad J: kind 'mean' leaves the sample out (computed as 'rloo')")
        return ""

    assert_close(got, factor * grad_J, tol, what=f"{label}, G = {G}, kind {kind!r}: E[sum_i A_i grad log pi(y_i)] vs {form}"
                 f" (J = {J:.6g})", call=call.code, diagnose=diagnose)


@check("GROUP-BASELINE-BIAS")
def baseline_bias(ctx):
    """Exact over every joint outcome: rloo gives G grad J, the group mean (G - 1) grad J."""
    for G in (2, 3, 4):
        for kind in ("rloo", "mean"):
            check_baseline(ctx, [0.25, 0.25, 0.5], [1.0, 0.0, 0.5], G, kind, "pi = [1/4, 1/4, 1/2], R = [1, 0, 0.5]")

    ctx.property(draws.baseline_problems(), lambda d: check_baseline(ctx, *d, "drawn"), label="drawn", tier="autograd")


# ---------------------------------------------------------------------------------------------
# kl_penalty: calls, per-token formulas and tolerances


def penalty_kinds(ctx) -> tuple[str, ...]:
    """The kinds the candidate provides (kl_penalty_kinds, default all six): a library with only k3 (TRL)
    is judged on what it has, and the rest is said in the clause's notes."""
    return ctx.provided("kl_penalty_kinds")


def off_policy_convention(ctx) -> str:
    return ctx.convention("kl_penalty_off_policy")


def _base(kind: str) -> str:
    return kind[:-1] if kind.endswith("+") else kind


def penalty_values(kind, a, b) -> np.ndarray:
    """The named estimator of KL(pi || pi_ref) per token, x = b - a (float64)."""
    return kl_estimators.exact(_base(kind), a, b)


def value_tolerance(kind, a, b, c, u, weighted=True) -> np.ndarray:
    """kl.per_sample_tolerance for the named estimator, plus, for a straight-through kind, the two
    roundings of a value formed as s + (k - s) with s = w k2 (verl's form): 2 u (w |k2| + |k|)."""
    tol = kl_estimators.per_sample_tolerance(_base(kind), a, b, u)
    if kind.endswith("+"):
        x = b - a
        w = np.exp(a - c) if (c is not None and weighted) else 1.0
        tol = tol + 4 * u * (w * 0.5 * x**2 + np.abs(penalty_values(kind, a, b)))
    return tol


def token_derivative(kind, a, b, c=None, weighted=True) -> np.ndarray:
    """d kl / d logp per token: k1 -> 1, k2 and '+' -> logp - logp_ref (times pi / pi_old off-policy), k3 -> 1 - e^x."""
    x = b - a
    if kind.endswith("+"):
        return (np.exp(a - c) if (c is not None and weighted) else 1.0) * -x
    if kind == "k1":
        return np.ones_like(x)
    if kind == "k2":
        return -x
    return -np.expm1(x)


def derivative_tolerance(kind, a, b, c, u, weighted=True) -> np.ndarray:
    """With dx = 2 u (|a| + |b|) the error of the candidate's log ratio: k1 4 u; k2 and '+' dx + 2 u |x|;
    k3 e^x dx + (ELEMENTARY + 2) u (e^x + 1). Off-policy '+' multiplies by w = exp(a - c), itself off
    by w (2 u (|a| + |c|) + ELEMENTARY u), and rounds the product. Doubled for the float64 oracle."""
    x = b - a
    dx = 2 * u * (np.abs(a) + np.abs(b))
    if kind.endswith("+") or kind == "k2":
        bound = dx + 2 * u * np.abs(x)
        if kind.endswith("+") and c is not None and weighted:
            w = np.exp(a - c)
            bound = w * bound + np.abs(x) * w * (2 * u * (np.abs(a) + np.abs(c)) + ELEMENTARY * u) + 2 * u * w * np.abs(x)
    elif kind == "k1":
        bound = 4 * u * np.ones_like(x)
    else:
        ex = np.exp(x)
        bound = ex * dx + (ELEMENTARY + 2) * u * (ex + 1)
    return 2 * bound + 4 * smallest_normal(u) + TINY


def run_penalty(ctx, logp, logp_ref, kind, logp_old=None, *, allow_nonfinite=False):
    """``(values, call, a, b, c)``: the candidate's (B, L) values and the inputs as it received them."""
    a, b = rounded(logp, ctx.dtype), rounded(logp_ref, ctx.dtype)
    c = None if logp_old is None else rounded(logp_old, ctx.dtype)
    args = {"logp": a, "logp_ref": b, "kind": kind}
    if c is not None:
        args["logp_old"] = c
    call = ctx.call("kl_penalty", args, array="torch", requires_grad=("logp",), shape=a.shape, allow_nonfinite=allow_nonfinite)
    return call.outputs[0], call, a, b, c


def vjp(call, weights) -> np.ndarray:
    """d (sum weights * kl) / d logp as float64 (zeros when no gradient reaches logp)."""
    raw, leaf = call.raw, call.inputs["logp"]
    if isinstance(raw, torch.Tensor) and raw.requires_grad:
        w = torch.as_tensor(np.asarray(weights, dtype=np.float64), device=raw.device).to(raw.dtype).reshape(raw.shape)
        try:
            # The gradient of the scalar sum(w * kl), not grad_outputs=w: the same vector-Jacobian product bit
            # for bit (d/d kl of the sum is w exactly), but grad_outputs makes torch import its symbolic-shapes
            # module, and with it SymPy (half a second the checks need not pay).
            (grad,) = torch.autograd.grad((raw * w).sum(), leaf, allow_unused=True, retain_graph=True)
        except RuntimeError as exc:
            raise CandidateError(f"kl_penalty returned a tensor autograd cannot differentiate: {exc}") from None
        if grad is not None:
            return grad.detach().cpu().double().numpy().reshape(leaf.shape)
    return np.zeros(tuple(leaf.shape))


def clamp_pattern(actual, expected, tol) -> str:
    """If every wrong value sits at one magnitude smaller than the exact one: the estimate is clamped there."""
    bad = ~(np.abs(actual - expected) <= tol)
    if not bad.any():
        return ""
    level = np.abs(actual[bad])
    if np.all(np.isfinite(level)) and np.ptp(level) <= 1e-6 * (1 + level[0]) and np.all(level < np.abs(expected[bad])):
        return f"the estimate is clamped at +-{level[0]:.6g} (OpenRLHF and verl clamp to [-10, 10]): large divergences are biased low " \
               "and get no gradient"
    return ""


def check_token_values(ctx, kind, a_in, b_in, c_in=None, *, what, cause=""):
    values, call, a, b, c = run_penalty(ctx, a_in, b_in, kind, c_in)
    u = call.unit_roundoff
    weighted = off_policy_convention(ctx) == "importance-weighted"

    def diagnose(v):
        clamp = clamp_pattern(v, penalty_values(kind, a, b), value_tolerance(kind, a, b, c, u, weighted))
        if clamp:
            return clamp
        inverted = kl_estimators.exact(_base(kind), b, a)
        if matches(v, inverted, kl_estimators.per_sample_tolerance(_base(kind), b, a, u)):
            return "the log ratio is inverted: logp - logp_ref takes the place of logp_ref - logp (bug D1)"
        if kind.endswith("+") and matches(v, 0.5 * (b - a) ** 2, kl_estimators.per_sample_tolerance("k2", a, b, u)):
            return f"kind {kind!r} returns the k2 value: a straight-through kind keeps the value of {_base(kind)}"
        return ""

    assert_close(values, penalty_values(kind, a, b), value_tolerance(kind, a, b, c, u, weighted),
                 what=f"{what}: kind {kind!r} per token", call=call.code, cause=cause, diagnose=diagnose)
    return values, call, a, b, c


# ---------------------------------------------------------------------------------------------
# kl_penalty: expected gradients over a categorical


def reverse_gradient(a, b) -> np.ndarray:
    """grad_theta KL(pi || pi_ref) for pi = softmax(theta): pi_b (l_b - sum_y pi_y l_y), l = a - b."""
    p, l = np.exp(a), a - b
    return p * (l - math.fsum(p * l))


def forward_gradient(a, b) -> np.ndarray:
    """grad_theta KL(pi_ref || pi) = pi - pi_ref."""
    return np.exp(a) - np.exp(b)


def logit_gradient(v, a) -> np.ndarray:
    """d loss / d theta from v = d loss / d log pi: v_b - pi_b sum_y v_y."""
    return v - np.exp(a) * math.fsum(v)


def expected_gradient(ctx, kind, log_p, log_ref, log_old=None):
    """The candidate's exact expected gradient with respect to the logits, and its tolerance.

    The outcomes sit in one row (1, n). Returns ``(E, tol, oracle, call, a, b, c)`` where ``oracle`` is
    the same expectation from the per-token formula."""
    values, call, a, b, c = run_penalty(ctx, log_p[None, :], log_ref[None, :], kind,
                                        None if log_old is None else log_old[None, :])
    a, b = a[0], b[0]
    c = None if c is None else c[0]
    s = np.exp(a if c is None else c)  # the sampling probabilities, held fixed
    v = vjp(call, s[None, :])[0]
    E = logit_gradient(v, a)
    u = call.unit_roundoff
    weighted = off_policy_convention(ctx) == "importance-weighted"
    d = token_derivative(kind, a, b, c, weighted)
    e = s * derivative_tolerance(kind, a, b, c, u, weighted) + 3 * u * np.abs(s * d)  # s rounded, product rounded
    p = np.exp(a)
    n = len(a)
    tol = e + p * math.fsum(e) + 4 * n * U64 * (np.abs(v) + p * math.fsum(np.abs(v))) + TINY
    oracle = logit_gradient(s * d, a)
    return E, tol, oracle, call, a, b, c


def truth_for(kind, a, b, c, weighted=True):
    """What the clause says the expected gradient is, its name, and the rounded-input term its identity needs."""
    p, q = np.exp(a), np.exp(b)
    if kind.endswith("+") and (c is None or weighted):
        return reverse_gradient(a, b), "grad KL(pi || pi_ref) (reverse)", 4 * len(a) * U64 * p * (np.abs(a - b) + 1)
    if c is not None:
        return None, "", 0.0
    if kind == "k1":
        return np.zeros_like(a), "0", p * abs(1 - math.fsum(p))
    if kind == "k2":
        return reverse_gradient(a, b), "grad KL(pi || pi_ref) (reverse)", 4 * len(a) * U64 * p * (np.abs(a - b) + 1)
    # sum_y pi_y (1 - q_y / pi_y)(e_y - pi) = pi - q - pi (sum pi - sum q)
    return forward_gradient(a, b), "grad KL(pi_ref || pi) (forward)", p * abs(math.fsum(p) - math.fsum(q)) + 4 * U64 * (p + q)


def _gradient_diagnosis(kind, a, b, c, tol, E):
    names = [(reverse_gradient(a, b), "the reverse KL's gradient"), (forward_gradient(a, b), "the forward KL's gradient"),
             (np.zeros_like(a), "zero")]
    if c is not None:
        names.append((logit_gradient(np.exp(c) * (a - b), a), "the unweighted k2 gradient on pi_old's samples"))
        w = np.minimum(np.exp(a - c), 10.0)
        names.append((logit_gradient(np.exp(c) * w * (a - b), a), "the gradient with the importance weight clipped at 10"))
    for value, name in names:
        if matches(E, value, tol):
            if kind in ("k1+", "k3+") and name == "the forward KL's gradient" or kind == "k1+" and name == "zero":
                return f"kind {kind!r} is not straight-through: its gradient is {_base(kind)}'s own ({name})"
            if name == "zero":
                return "no gradient reaches logp: the penalty is computed on detached log-probabilities (or as k1)"
            if kind == "k3" and name == "the reverse KL's gradient":
                return ("kind 'k3' differentiates like a straight-through or ratio-corrected k3 (TRL's k3 times the "
                        "non-detached ratio): its gradient is the reverse KL's; plain k3's is the forward KL's")
            if name == "the unweighted k2 gradient on pi_old's samples":
                return "the importance weight pi / pi_old is missing: the gradient is k2's on pi_old's samples (verl)"
            if name.startswith("the gradient with the importance weight clipped"):
                return "the importance weight is clipped at 10 (OpenRLHF KL_IS_WEIGHT_CLIP): biased where pi / pi_old > 10"
            return f"the expected gradient is {name}"
    return ""


def check_expected_gradient(ctx, kind, log_p, log_ref, log_old=None, *, what, published=None, published_tol=0.0):
    E, tol, oracle, call, a, b, c = expected_gradient(ctx, kind, log_p, log_ref, log_old)
    weighted = off_policy_convention(ctx) == "importance-weighted"
    truth, name, identity_tol = truth_for(kind, a, b, c, weighted)
    target, target_name = (truth, name) if truth is not None else (oracle, "the expectation of its own per-token gradient")
    tol = tol + identity_tol
    sampler = "pi" if c is None else "pi_old"
    def diagnose(value):
        named = _gradient_diagnosis(kind, a, b, c, tol, value)
        if named:
            return named
        per_token = vjp(call, np.ones((1, len(a))))[0]
        u = call.unit_roundoff
        off = ~(np.abs(per_token - token_derivative(kind, a, b, c, weighted)) <= derivative_tolerance(kind, a, b, c, u, weighted))
        off &= per_token == 0  # a clamp zeroes the gradient; any other wrong value is no evidence of one
        if off.any():
            i = int(np.flatnonzero(off)[0])
            return (f"the per-token gradient is wrong at log(pi_ref / pi) = {b[i] - a[i]:.6g}: expected "
                    f"{token_derivative(kind, a, b, c, weighted)[i]:.6g}, got {per_token[i]:.6g} (a clamp of the log ratio or "
                    "of the estimate zeroes it: see KL-PENALTY-EXTREME-LOG-RATIO)")
        return ""

    assert_close(E, target, tol, what=f"{what}: kind {kind!r}, sum_y {sampler}(y) d kl(y) / d theta vs {target_name}",
                 call=call.code, diagnose=diagnose)
    if published is not None:
        assert_close(E, published, tol + published_tol, what=f"{what}: kind {kind!r} expected gradient vs the published values",
                     call=call.code, diagnose=lambda value: _gradient_diagnosis(kind, a, b, c, tol, value))
    return E


# The KL known answer (spec/contract/40_kl.toml gives its per-token values, 85_grpo.toml the expected gradients).
EXPECTED_GRADIENT = "sum_y s(y) d kl(y) / d theta"  # the derived number of the kl_penalty known answers
_KNOWN = contract.known_answer("grpo.kl-penalty-k1").arrays()
KL_KNOWN_LOG_P, KL_KNOWN_LOG_REF = _KNOWN["logp"][0], _KNOWN["logp_ref"][0]
OFF_POLICY_LOG_OLD = contract.known_answer("grpo.kl-penalty-off-policy-k1").arrays()["logp_old"][0]  # an off-policy sampler pi_old
KL_KNOWN_REVERSE = contract.known_answer("grpo.kl-penalty-k2").value(EXPECTED_GRADIENT)  # grad KL(pi || pi_ref)


def published_gradient(kind: str, off_policy: bool = False) -> tuple[list | None, float]:
    """``(expected gradient, how far the published digits may be off)`` for ``kind`` at the KL known answer, or
    ``(None, 0)`` where none is published (k2 off-policy)."""
    name = kind.replace("+", "-plus")  # a known answer's id is lowercase letters, digits, dots and dashes
    answer = contract.known_answers("kl_penalty").get(f"grpo.kl-penalty-{'off-policy-' if off_policy else ''}{name}")
    return (None, 0.0) if answer is None else (answer.value(EXPECTED_GRADIENT), answer.published_error(EXPECTED_GRADIENT))


WIDE_LOG_P, WIDE_LOG_REF, WIDE_LOG_OLD = np.log([0.05, 0.9, 0.05]), np.log([0.2, 0.3, 0.5]), np.log([0.6, 0.05, 0.35])  # pi / pi_old = 18


# The value and expected-gradient clauses judge the estimators where no clamp a library uses acts:
# |log(pi_ref / pi)| <= MODERATE (e^2.5 = 12.2 < 13.61, where verl's k3 clamp starts). Larger ratios,
# clamps, overflow and cancellation belong to KL-PENALTY-EXTREME-LOG-RATIO.


@check("KL-PENALTY-VALUES")
def penalty_values_check(ctx):
    """The KL known answer per token (published), E_pi[k] = KL(pi || pi_ref) for k1 / k3, values unchanged by logp_old, drawn (B, L)."""
    kinds = penalty_kinds(ctx)
    for kind in kinds:
        base = _base(kind)
        values, call, a, b, c = check_token_values(ctx, kind, KL_KNOWN_LOG_P[None, :], KL_KNOWN_LOG_REF[None, :], what="the KL known answer")
        u = call.unit_roundoff
        known = contract.known_answer(f"kl.known-{base}")
        assert_close(values[0], known.value("estimates"), known.published_error("estimates") + value_tolerance(kind, a, b, c, u)[0],
                     what=f"kind {kind!r} at the KL known answer vs the published values", call=call.code)
        mean = math.fsum(np.exp(a[0]) * values[0])
        tol = float(np.sum(np.exp(a[0]) * value_tolerance(kind, a, b, c, u)[0])) + kl_estimators.expectation_tolerance(base, a[0], b[0], values[0], u)
        expectation = "sum exp(logp_sampler) estimates"
        expected = known.value(expectation)
        assert_close(mean, expected, tol + known.published_error(expectation), what=f"sum_y pi(y) {kind}(y) at the KL known answer vs {expected}", call=call.code)
        check_token_values(ctx, kind, KL_KNOWN_LOG_P[None, :], KL_KNOWN_LOG_REF[None, :], OFF_POLICY_LOG_OLD[None, :],
                           what="the KL known answer with logp_old = log [0.3, 0.3, 0.4] (values do not depend on logp_old)")

    def verify(drawn):
        (a, b, c), kind, off = drawn
        check_token_values(ctx, kind, a, b, c if off else None, what="drawn tokens" + (" with logp_old" if off else ""))

    ctx.property(st.tuples(draws.token_batches(), st.sampled_from(kinds), st.booleans()), verify, label="drawn",
                 tier="grouped")


@check("KL-PENALTY-EXPECTED-GRADIENT")
def penalty_expected_gradient(ctx):
    """On-policy, exact over a categorical: k1 -> 0, k2 / '+' -> reverse KL's gradient, k3 -> forward KL's (the KL known answer, then drawn)."""
    kinds = penalty_kinds(ctx)
    for kind in kinds:
        published, published_tol = published_gradient(kind)
        check_expected_gradient(ctx, kind, KL_KNOWN_LOG_P, KL_KNOWN_LOG_REF, what="the KL known answer", published=published,
                                published_tol=published_tol)

    def verify(drawn):
        (log_p, log_ref), kind = drawn
        check_expected_gradient(ctx, kind, log_p, log_ref, what="drawn categorical")

    ctx.property(st.tuples(draws.moderate_categoricals(count=2), st.sampled_from(kinds)), verify, label="drawn",
                 tier="grouped")


@check("KL-PENALTY-OFF-POLICY")
def penalty_off_policy(ctx):
    """Tokens from pi_old: the '+' kinds' expected gradient is the reverse KL's (importance-weighted, unclipped)."""
    kinds = penalty_kinds(ctx)
    straight = [k for k in kinds if k.endswith("+")]
    if off_policy_convention(ctx) == "on-policy-only" and straight:
        E, tol, _, call, a, b, c = expected_gradient(ctx, straight[-1], KL_KNOWN_LOG_P, KL_KNOWN_LOG_REF, OFF_POLICY_LOG_OLD)
        raise ClauseFailure(
            f"declared kl_penalty_off_policy = 'on-policy-only': with tokens drawn from pi_old = [0.3, 0.3, 0.4] the "
            f"expected gradient of {straight[-1]} is {np.round(E, 6).tolist()}, not grad KL(pi || pi_ref) = {KL_KNOWN_REVERSE}",
            call=call.code,
            cause="the candidate does not importance-weight the penalty's gradient off-policy (by its own declaration); "
            "list KL-PENALTY-OFF-POLICY in its xfail entries with the reason")
    for kind in kinds:
        published, published_tol = published_gradient(kind, off_policy=True)
        check_expected_gradient(ctx, kind, KL_KNOWN_LOG_P, KL_KNOWN_LOG_REF, OFF_POLICY_LOG_OLD, what="the KL known answer, tokens from pi_old = [0.3, 0.3, 0.4]",
                                published=published, published_tol=published_tol)
        check_expected_gradient(ctx, kind, WIDE_LOG_P, WIDE_LOG_REF, WIDE_LOG_OLD,
                                what="pi = [0.05, 0.9, 0.05], pi_ref = [0.2, 0.3, 0.5], tokens from pi_old = "
                                "[0.6, 0.05, 0.35] (pi / pi_old = 18)")

    def verify(drawn):
        (log_p, log_ref, log_old), kind = drawn
        check_expected_gradient(ctx, kind, log_p, log_ref, log_old, what="drawn categorical, tokens from pi_old")

    ctx.property(st.tuples(draws.moderate_categoricals(count=3), st.sampled_from(kinds)), verify, label="drawn",
                 tier="grouped")


# ---------------------------------------------------------------------------------------------
# extreme log ratios and clamps

EXTREME_LOG_RATIOS = np.array([-30.0, -20.5, -11.0, -3.0, 3.0, 11.0, 20.5, 30.0])


def _token_ok(ctx, kind, a, b) -> tuple[bool, np.ndarray, np.ndarray, object]:
    values, call, a, b, _ = run_penalty(ctx, a, b, kind, allow_nonfinite=True)
    grad = vjp(call, np.ones_like(a))
    u = call.unit_roundoff
    ok_value = np.abs(values - penalty_values(kind, a, b)) <= value_tolerance(kind, a, b, None, u)
    ok_grad = np.abs(grad - token_derivative(kind, a, b)) <= derivative_tolerance(kind, a, b, None, u)
    return ok_value & ok_grad, values, grad, call


def clamp_boundary(ctx, kind, base, good, bad) -> float:
    """Bisect between a log ratio that is exact and one that is not: where the candidate starts to deviate."""
    for _ in range(40):
        mid = 0.5 * (good + bad)
        ok, *_ = _token_ok(ctx, kind, np.array([[base]]), np.array([[base + mid]]))
        good, bad = (mid, bad) if ok.all() else (good, mid)
        if abs(bad - good) < 1e-5 * max(1.0, abs(bad)):
            break
    return bad


def describe_clamps(ctx, first_kind) -> str:
    """describe_clamp for every kind (the failing one first): where each starts to deviate."""
    kinds = [first_kind] + [k for k in penalty_kinds(ctx) if k != first_kind]
    found = [text for text in (describe_clamp(ctx, kind) for kind in kinds) if text]
    if not found:
        return ""
    return "; ".join(found) + ": a clamp of the log ratio or of the estimate (verl k3: 13.61 and e^-11; OpenRLHF k1: " \
        "e^10 and e^-10), which biases the value and zeroes the gradient beyond"


CLAMP_FLOOR = 1.0  # the clamps libraries use start at |log r| = 2.61 (verl's k3), 4.47 (k2 under +-10) and 10 (OpenRLHF)


def describe_clamp(ctx, kind, base=-0.25) -> str:
    """Where value and gradient start to go wrong on each side, with the ratio pi_ref / pi."""
    parts = []
    for side in (1.0, -1.0):
        grid = np.concatenate([[0.0], np.sort(np.abs(EXTREME_LOG_RATIOS))]) * side
        ok, *_ = _token_ok(ctx, kind, np.full((1, len(grid)), base), base + grid[None, :])
        if ok[0].all():
            continue
        first = int(np.flatnonzero(~ok[0])[0])
        if first == 0:
            return ""
        x = clamp_boundary(ctx, kind, base, grid[first - 1], grid[first])
        if abs(x) < CLAMP_FLOOR:
            return ""  # wrong near log r = 0: a wrong estimator, not a clamp of extreme ratios
        parts.append(f"log(pi_ref / pi) {'>' if side > 0 else '<'} {x:.5g} (pi_ref / pi {'>' if side > 0 else '<'} {math.exp(x):.4g})")
    if not parts:
        return ""
    return f"kind {kind!r} wrong for " + " and for ".join(parts)


@check("KL-PENALTY-EXTREME-LOG-RATIO")
def penalty_extreme(ctx):
    """|log r| up to 30 and log-probabilities near -1000: values and per-token gradients exact, clamps located."""

    kinds = penalty_kinds(ctx)

    def verify(a, b, kinds=kinds):
        for kind in kinds:
            ok, values, grad, call = _token_ok(ctx, kind, a, b)
            if ok.all():
                continue
            a64, b64 = rounded(a, ctx.dtype), rounded(b, ctx.dtype)
            bad = ~np.isfinite(values) | ~np.isfinite(grad)
            if bad.any():
                i = tuple(int(j) for j in np.argwhere(bad)[0])
                raise ClauseFailure(f"kind {kind!r}: value {values[i]} and gradient {grad[i]} at index {i} on finite input "
                                    f"(logp = {a64[i]!r}, logp_ref = {b64[i]!r}, log ratio {b64[i] - a64[i]:.6g})",
                                    call=call.code, cause="overflow: exp of a large log ratio (inf * 0 gives a NaN gradient)")
            located = describe_clamps(ctx, kind)  # measured: where the candidate starts to deviate, exact before
            u = call.unit_roundoff
            cause = ""
            if not located and kind in ("k3", "k3+"):  # the usual suspect, not measured
                cause = "the gradient cancels catastrophically where e^x is large: k3 multiplied by a non-detached ratio " \
                        "(TRL's use_bias_correction_kl) differentiates to (1 - e^x) + (e^x - 1 - x); write it as -x"
            assert_close(values, penalty_values(kind, a64, b64), value_tolerance(kind, a64, b64, None, u),
                         what=f"kind {kind!r} value at |log ratio| up to 30", call=call.code, cause=cause,
                         diagnose=lambda _: located)
            assert_close(grad, token_derivative(kind, a64, b64), derivative_tolerance(kind, a64, b64, None, u),
                         what=f"kind {kind!r} d kl / d logp at |log ratio| up to 30", call=call.code, cause=cause,
                         diagnose=lambda _: located)

    n = len(EXTREME_LOG_RATIOS)
    verify(np.full((1, n), -0.25), -0.25 + EXTREME_LOG_RATIOS[None, :])
    # log ratios with many fraction bits: e^x - x - 1 rounds where e^x is large (a cancelling gradient shows)
    verify(np.full((1, 5), -0.3), -0.3 + np.array([[7.1, 13.37, 23.456789, 29.9, -29.9]]))
    verify(np.full((2, n // 2), -1000.0), (-1000.0 + EXTREME_LOG_RATIOS).reshape(2, n // 2))
    verify((-1000.0 - EXTREME_LOG_RATIOS)[:, None], np.full((n, 1), -1000.0))

    ctx.property(draws.extreme_tokens(kinds=kinds), lambda d: verify(*d), label="drawn", tier="grouped")

"""Checks for the normalisation chapter (``spec/clauses/35_normalisation.toml``): running moments and their
merge, observation normalisation, reward scaling, and the diagnostics of an update.

Expected numbers are exact: the running statistics of the rows a candidate received (rounded to its
precision first) are computed in integer arithmetic (every float is an integer times a power of two), the
return accumulator and the explained variance in rationals, and rounded to float64 once. The diagnostics
are means of per-sample values the KL chapter's formulas give (``checks/kit/kl_estimators.py``).

Tolerances (u: the unit roundoff judged; first order in u; the oracle rounds its results once, so 4 u64 of
every value is added; counts n are exact numbers, a prior's count c included).

* Running statistics. A candidate folds batches into (m, v, n) by Chan et al.'s update. The bound is carried
  step by step over the very batches given (:func:`moments_bounds`), with Em, Ev, En the bounds on the
  mean's, the variance's and the count's errors. A batch of b rows x_i with mean m_b, spread S = max|x_i - m_b|,
  magnitude A = max|x_i| and row errors e_i (the reward chapter's accumulators carry their own) has
      Em_b = u ((b - 1) A + 2 b S + |m_b|) + max e_i
      EM2_b = (b + 4) u M2_b + b Em_b^2 + 2 b S Em_b + 2 sum |x_i - m_b| (e_i + max e) + sum (e_i + max e)^2
  (the sum's rounding, or Welford's one row at a time, whose running mean errs by Em_b and enters every
  later deviation; the squares', the sum's and the division's roundings; the first-order term of an error in
  the mean cancels in sum (x_i - m_b) only for the two-pass form, so it is kept). Merging (m_a, v_a, n_a) with
  it, w = n_b / n, C = n_a n_b / n, delta = m_b - m_a, Ed = Em_a + Em_b + u |delta|:
      En = En_a + u n
      Em = (1 - w) Em_a + w Em_b + |delta| w (4 u + En / n) + u (|m| + 2 (1 - w) |m_a| + 2 w |m_b|)
      EM2 = n_a Ev_a + v_a En_a + n_b Ev_b + 2 |delta| C Ed + C Ed^2 + delta^2 (n_b En_a / n + C En / n)
            + u (3 n_a v_a + 2 n_b v_b + 6 C delta^2 + 2 M2)
      Ev = EM2 / n + v (u + En / n)
  which covers delta n_b / n and (n_a m_a + n_b m_b) / n for the mean, a stored variance or a stored M2. With a
  declared decay d the previous statistics enter with the weight d n_a (its scaling rounds: 2 u d n_a more on the
  count, the variance term's 3 u covers the rest) and every recursion is discounted by d. The
  textbook one-pass form E[x^2] - E[x]^2 errs by about u (m^2 + v) / v relative to the variance, far beyond.
* Normalisation ``y = (x - m) / d`` with d = sqrt(v + eps) (``variance``), sqrt(v) + eps (``std``) or
  max(sqrt(v), eps) (``max-std``): Ed = (Ev + u (v + eps)) / (2 d) + u d, and for the other forms
  min(Ev / (2 sqrt v), sqrt Ev) + u (sqrt v + d) (the square root is not Lipschitz at 0; |sqrt a - sqrt b| <=
  sqrt |a - b| holds everywhere); Ey = (Em + u |x - m| + |y| Ed) / (d - Ed) + u |y| while Ed < d, else
  unbounded (such an output is judged by the clip alone). The clip is 1-Lipschitz.
* Reward accumulator ``R_t = gamma R_{t-1} + r_t``: ER_t = gamma ER_{t-1} + u (3 |gamma R_{t-1}| + |R_t|) (gamma
  rounded, the product, the sum; a reset is exact), carried into the return statistics as row errors.
* diagnostic_approx_kl: the mean of per-sample estimates within ``per_sample_tolerance`` (the KL chapter's bound), plus
  the sums' roundings, 2 (B + M + 2) u mean |k| over M minibatches, doubled for the oracle.
* diagnostic_clip_fraction: counts are exact; a fraction rounds once per division and once per term of a mean: 4 (M + 2)
  u |f|. A sample within 8 u (|r| + 1 + eps) of the boundary may round either way in a correct candidate
  (exp, expm1, exp(a) / exp(b), or the comparison in log space): drawn examples holding one are skipped; the
  fixed boundary case, r = 1 exactly at eps = 0, is decided in every precision.
* diagnostic_explained_variance 1 - a / b, a = Var[R - V], b = Var[R] (+ eps): the residuals round once (u |R - V|),
  each variance is within (B + 4) u of its value plus 2 u mean(|e - mean e| |e|) for the rounded residuals;
  E = (Ea + |a / b| Eb) / b + u (|a / b| + |1 - a / b|), doubled for the oracle.
* diagnostic_entropy: with z the logits, L = logsumexp z and l = z - L: El = u (2 M + A + ELEMENTARY (1 + log A +
  |L|) + |L| + |l|) (M = max |z|; as for a logsumexp), Ep = p (El + ELEMENTARY u), and each term -p l errs by
  |l| Ep + p El + u p |l|; the row sums A terms (A u sum p |l|) and the batch mean adds (B + M) u |H|.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np

from ..kit import edges
from ..kit.context import Call, CandidateError
from ..kit.assertions import ClauseFailure, assert_close, matches
from ..kit.kl_estimators import ELEMENTARY, exact as kl_exact, per_sample_tolerance
from ..kit.registry import check
from ..kit.strategies import normalisation as draws
from ..kit.strategies import rounded
from ..kit.tolerances import TINY, U64, smallest_normal
from ...spec import contract

ORACLE = 4 * U64  # the oracle's own rounding of each value it returns, relative


def agrees(actual, wrong, tol) -> bool:
    """For diagnoses: ``actual`` equals a known wrong answer to within twice the tolerance of the right one plus a few
    float64 roundings of the wrong one (which may be far larger than the right answer)."""
    wrong = np.asarray(wrong, dtype=np.float64)
    return matches(actual, wrong, 2 * np.asarray(tol) + 1e-12 * np.abs(wrong))


# ---------------------------------------------------------------------------------------------
# exact running statistics


def _integers(values) -> tuple[list[int], int]:
    """``values`` (float64) as integers times 2^-E: ``(ints, E)``, exactly."""
    values = np.asarray(values, dtype=np.float64).ravel()
    mantissa, exponent = np.frexp(values)
    mantissa = (mantissa * 2.0**53).astype(np.int64)  # exact: 53-bit integers
    shift = exponent.astype(np.int64) - 53
    E = max(0, -int(shift.min())) if len(values) else 0
    return [int(m) << int(s + E) if s + E >= 0 else int(m) >> int(-(s + E)) for m, s in zip(mantissa, shift)], E


class ExactMoments:
    """The exact running statistics of a prior pseudo-batch (count c, mean 0, variance 1) and the rows added,
    per feature: sums of x and x^2 as rationals."""

    def __init__(self, features: int, count0: float, decay: float | None = None):
        self.count = Fraction(count0)
        self.s1 = [Fraction(0)] * features
        self.s2 = [Fraction(count0)] * features  # the prior's mass c at E[y^2] = 1
        self.decay = None if decay is None else Fraction(float(decay))

    def add(self, rows) -> None:
        """Fold in a batch: every earlier weight (the prior's included) is multiplied by the decay first."""
        if self.decay is not None:
            self.count *= self.decay
            self.s1 = [x * self.decay for x in self.s1]
            self.s2 = [x * self.decay for x in self.s2]
        rows = np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)
        for d in range(rows.shape[1]):
            ints, E = _integers(rows[:, d])
            self.s1[d] += Fraction(sum(ints), 1 << E)
            self.s2[d] += Fraction(sum(i * i for i in ints), 1 << (2 * E))
        self.count += len(rows)

    def exact(self):
        if self.count == 0:  # nothing yet: the initial state
            return [Fraction(0)] * len(self.s1), [Fraction(1)] * len(self.s1)
        means = [s / self.count for s in self.s1]
        return means, [s / self.count - m * m for s, m in zip(self.s2, means)]

    def floats(self) -> tuple[np.ndarray, np.ndarray, float]:
        means, variances = self.exact()
        return np.array([float(m) for m in means]), np.array([float(v) for v in variances]), float(self.count)


def concatenation(x, batch_end, count0, decay=None) -> tuple[np.ndarray, np.ndarray, float]:
    """The exact statistics of the prior followed by every row (the batches do not matter unless a decay weighs
    them)."""
    stats = ExactMoments(x.shape[1], count0, decay)
    if decay is None:
        stats.add(x)
    else:
        for rows in batches(x, batch_end):
            stats.add(rows)
    return stats.floats()


# ---------------------------------------------------------------------------------------------
# the running bound (module docstring)


@dataclasses.dataclass
class Bounds:
    """Running statistics in float64 (the magnitudes the bound needs) and the bounds on a candidate's errors:
    one row per batch folded in (after it), or a single state."""

    m: np.ndarray
    v: np.ndarray
    n: np.ndarray | float
    Em: np.ndarray
    Ev: np.ndarray
    En: np.ndarray | float

    @classmethod
    def start(cls, features: int, count0: float, u: float) -> "Bounds":
        zeros = np.zeros(features)
        return cls(zeros, np.ones(features), float(count0), zeros, zeros, u * float(count0))

    def at(self, k: int) -> "Bounds":
        """The state after batch k (of a run of batches)."""
        return Bounds(self.m[k], self.v[k], float(self.n[k]), self.Em[k], self.Ev[k], float(self.En[k]))


def batch_statistics(x, ends, u, row_errors=None):
    """Per batch of ``x`` (rows ending where ``ends``): ``(sizes (K,), m_b, v_b, Em_b, Ev_b)``, each (K, D)
    (module docstring), computed for every batch at once."""
    x = np.asarray(x, dtype=np.float64)
    stops = np.flatnonzero(ends) + 1
    starts = np.concatenate([[0], stops[:-1]])
    sizes = (stops - starts).astype(np.float64)[:, None]
    which = np.repeat(np.arange(len(starts)), (stops - starts))
    m_b = np.add.reduceat(x, starts, axis=0) / sizes
    dev = np.abs(x - m_b[which])
    v_b = np.add.reduceat(dev**2, starts, axis=0) / sizes
    A, S = np.maximum.reduceat(np.abs(x), starts, axis=0), np.maximum.reduceat(dev, starts, axis=0)
    e = np.zeros_like(x) if row_errors is None else np.broadcast_to(np.asarray(row_errors, dtype=np.float64), x.shape)
    e_max = np.maximum.reduceat(e, starts, axis=0)
    spread = e + e_max[which]
    Em_b = u * ((sizes - 1) * A + 2 * sizes * S + np.abs(m_b)) + e_max
    EM2_b = ((sizes + 4) * u * sizes * v_b + sizes * Em_b**2 + 2 * sizes * S * Em_b
             + 2 * np.add.reduceat(dev * spread, starts, axis=0) + np.add.reduceat(spread**2, starts, axis=0))
    return sizes[:, 0], m_b, v_b, Em_b, EM2_b / sizes + u * v_b


def recur(factor: float, increments, start) -> np.ndarray:
    """``y_k = factor y_{k-1} + increments_k`` from ``y_0 = start`` (a cumulative sum when the factor is 1)."""
    increments = np.asarray(increments, dtype=np.float64)
    if factor == 1.0:
        return start + np.cumsum(increments, axis=0)
    out, y = np.empty_like(increments), start
    for k in range(len(increments)):
        y = factor * y + increments[k]
        out[k] = y
    return out


def fold_bounds(state: Bounds, sizes, m_b, v_b, Em_b, Ev_b, u, En_b=None, decay=None) -> Bounds:
    """The pairwise update folding K batches into ``state`` one after another, with the error bounds after each
    (module docstring). With a decay d the previous statistics enter each merge with the weight d n_{k-1}. The
    recursions are linear with telescoping factors ((1 - w_k) = d n_{k-1} / n_k), so they are (discounted)
    cumulative sums: Em_k n_k = d Em_{k-1} n_{k-1} + s_k n_k, and X_k = n_k Ev_k grows by the terms of EM2_k."""
    d = 1.0 if decay is None else float(decay)
    sizes = np.asarray(sizes, dtype=np.float64)
    n = recur(d, sizes, state.n)  # (K,)
    n_prev = np.concatenate([[state.n], n[:-1]])
    kept = d * n_prev  # the previous statistics' weight at each merge
    count_errors = u * n + (0.0 if decay is None else 2 * u * kept)  # the sum (and the scaling by d)
    En = recur(d, count_errors + (0.0 if En_b is None else np.asarray(En_b, dtype=np.float64)), state.En)
    En_prev = np.concatenate([[state.En], En[:-1]])
    # the exact running mean and variance, through sums of the data shifted by a reference (no cancellation)
    shift = m_b[0]
    s1 = recur(d, sizes[:, None] * (m_b - shift), state.n * (state.m - shift))
    s2 = recur(d, sizes[:, None] * (v_b + (m_b - shift) ** 2), state.n * (state.v + (state.m - shift) ** 2))
    m = shift + s1 / n[:, None]
    v = np.maximum(s2 / n[:, None] - (m - shift) ** 2, 0.0)
    m_prev = np.concatenate([state.m[None], m[:-1]])
    v_prev = np.concatenate([state.v[None], v[:-1]])
    w, C = (sizes / n)[:, None], (kept * sizes / n)[:, None]
    delta = m_b - m_prev
    s = (w * Em_b + np.abs(delta) * w * (4 * u + (En / n)[:, None])
         + u * (np.abs(m) + 2 * (1 - w) * np.abs(m_prev) + 2 * w * np.abs(m_b)))
    Em = recur(d, s * n[:, None], state.Em * state.n) / n[:, None]
    Em_prev = np.concatenate([state.Em[None], Em[:-1]])
    Ed = Em_prev + Em_b + u * np.abs(delta)
    M2 = n[:, None] * v
    rest = (sizes[:, None] * Ev_b + 2 * np.abs(delta) * C * Ed + C * Ed**2
            + delta**2 * ((sizes * d * En_prev / n)[:, None] + C * (En / n)[:, None])
            + u * (3 * kept[:, None] * v_prev + 2 * sizes[:, None] * v_b + 6 * C * delta**2 + 2 * M2))
    grow = v_prev * d * En_prev[:, None] + rest + v * (u * n + En)[:, None]
    X = recur(d, grow, state.n * state.Ev)
    return Bounds(m, v, n, Em, X / n[:, None], En)


def merge_bounds(a: Bounds, m_b, v_b, n_b, Em_b, Ev_b, u, En_b: float = 0.0, decay=None) -> Bounds:
    """One pairwise update of ``a`` with a batch's (or another sample's) statistics and their bounds."""
    return fold_bounds(a, [n_b], np.atleast_2d(m_b), np.atleast_2d(v_b), np.atleast_2d(Em_b), np.atleast_2d(Ev_b), u,
                       En_b=[En_b], decay=decay).at(0)


def stepwise(rows_per_step, features: int, count0, u, row_errors=None, decay=None):
    """Per step t of a stream whose step t brings the rows ``rows_per_step[t]`` (N, D): the exact statistics and
    the bounds after it, ``[(m, v, Em, Ev)]``, preceded by the initial state's."""
    T, D = len(rows_per_step), features
    exact = ExactMoments(D, count0, decay)
    out = [(np.zeros(D), np.ones(D), np.zeros(D), np.zeros(D))]
    if T == 0:
        return out
    N = len(rows_per_step[0])
    flat = np.concatenate(rows_per_step)
    ends = np.zeros(len(flat), dtype=bool)
    ends[N - 1::N] = True
    errors = None if row_errors is None else np.concatenate(row_errors)
    bounds = moments_bounds(flat, ends, count0, u, errors, decay)
    for t in range(T):
        exact.add(rows_per_step[t])
        m, v, _ = exact.floats()
        out.append((m, v, bounds.Em[t], bounds.Ev[t]))
    return out


def moments_bounds(x, batch_end, count0, u, row_errors=None, decay=None) -> Bounds:
    """The bounds after each batch of ``x`` (N, D) folded in from the prior (one row per batch)."""
    sizes, m_b, v_b, Em_b, Ev_b = batch_statistics(x, batch_end, u, row_errors)
    return fold_bounds(Bounds.start(x.shape[1], count0, u), sizes, m_b, v_b, Em_b, Ev_b, u, decay=decay)


def moments_tolerance(expected_mean, expected_var, bounds: Bounds, count: float, u: float):
    """Per-output tolerances ``(mean, var, count)``."""
    floor = 4 * smallest_normal(u) + TINY
    return (bounds.Em + ORACLE * np.abs(expected_mean) + floor,
            bounds.Ev + ORACLE * np.abs(expected_var) + floor,
            bounds.En + ORACLE * abs(count) + floor)


# ---------------------------------------------------------------------------------------------
# calling the candidate


def _as_array(result):
    """A Python or NumPy scalar as a 0-d array (a NumPy float keeps its precision); anything else unchanged."""
    if isinstance(result, (bool, np.bool_)):
        return result
    if isinstance(result, np.floating):
        return np.asarray(result)
    if isinstance(result, (int, float, np.integer)):
        return np.asarray(float(result))
    return result


def _scalar_outputs(ctx, operation: str):
    """The candidate with ``operation`` returning arrays where it returns Python or NumPy scalars (a count, a
    logged diagnostic), as a reported number usually is."""
    function = ctx.candidate.operations[operation]

    def wrapped(**kwargs):
        result = function(**kwargs)
        return tuple(_as_array(r) for r in result) if isinstance(result, tuple) else _as_array(result)

    return dataclasses.replace(ctx.candidate, operations={**ctx.candidate.operations, operation: wrapped})


def call(ctx, operation: str, args: dict, **options) -> Call:
    """``ctx.call`` with scalar outputs accepted."""
    candidate = ctx.candidate
    ctx.candidate = _scalar_outputs(ctx, operation)
    try:
        return ctx.call(operation, args, **options)
    finally:
        ctx.candidate = candidate


def run_moments(ctx, x, batch_end, **options):
    x = rounded(np.asarray(x, dtype=np.float64).reshape(len(x), -1), ctx.dtype)
    D = x.shape[1]
    c = call(ctx, "running_moments", {"x": x, "batch_end": np.asarray(batch_end, dtype=bool)}, outputs=3, **options)
    mean, var, count = c.outputs
    for name, value, shape in (("mean", mean, (D,)), ("var", var, (D,)), ("count", count, ())):
        if value.shape != shape:
            raise CandidateError(f"running_moments output {name} has shape {value.shape}; expected {shape}")
    return mean, var, float(count), c, x


def initial_count(ctx) -> float:
    return float(ctx.convention("moments_initial_count"))


def decay_of(ctx) -> float | None:
    decay = ctx.convention("moments_decay")
    return None if decay is None else float(decay)


def count_note(ctx) -> str:
    c0, decay = initial_count(ctx), decay_of(ctx)
    declared = ([] if c0 == ctx.default("moments_initial_count") else [f"moments_initial_count {c0:g}"]) + \
               ([] if decay is None else [f"moments_decay {decay:g}"])
    return f" (declared {', '.join(declared)})" if declared else ""


def batches(x, batch_end):
    start = 0
    for end in np.flatnonzero(batch_end):
        yield x[start:end + 1]
        start = end + 1


def diagnose_moments(x, batch_end, c0, mean, var, tol_m, tol_v, decay=None) -> str:
    """Name the mistake when the variance equals a known wrong merge of these batches."""
    parts = list(batches(x, batch_end))
    if len(parts) < 1:
        return ""
    stats = Bounds.start(x.shape[1], c0, 0.0)
    unbiased = Bounds.start(x.shape[1], c0, 0.0)
    zero = np.zeros(x.shape[1])
    for rows in parts:
        m_b, v_b = rows.mean(axis=0), rows.var(axis=0)
        stats = merge_bounds(stats, m_b, v_b, len(rows), zero, zero, 0.0, decay=decay)
        v_u = rows.var(axis=0, ddof=1) if len(rows) > 1 else np.full(x.shape[1], np.nan)
        unbiased = merge_bounds(unbiased, m_b, v_u, len(rows), zero, zero, 0.0, decay=decay)
    if decay is not None:  # moving averages of x and x^2 bias-corrected after forming their variance (VecNormV2):
        # (c s - (c m)^2) / c = s - c m^2 with c = 1 - d^n after n updates, i.e. the variance plus d^n m^2
        m, v, _ = concatenation(x, batch_end, c0, decay)
        late = v + float(decay) ** len(parts) * m**2
        off = np.abs(late - v)  # its own rounding (a cancellation at a large mean) need only be of its kind, as below
        if np.any(off > tol_v) and np.all(np.abs(var - late) <= np.maximum(0.5 * off, tol_v)):
            return ("the moving averages of x and x^2 are bias-corrected after forming E[x^2] - E[x]^2: the variance keeps "
                    "decay^count times the squared mean (it must be E_c[x^2] - E_c[x]^2 of the corrected averages)")
    for dtype in (np.float32, np.float64):  # the one-pass formula E[x^2] - E[x]^2 from running sums
        naive = naive_moments(parts, c0, decay, dtype)
        # its rounding differs with the order of the sums: the candidate's error need only be of the naive one's kind
        off = np.abs(naive - stats.v)
        if np.any(off > tol_v) and np.all(np.abs(var - naive) <= np.maximum(0.5 * off, tol_v)):
            return (f"the variance is E[x^2] - E[x]^2 from running sums in {np.dtype(dtype).name} (catastrophic cancellation when "
                    "the mean is large against the spread): use Chan's or Welford's update")
    if np.all(np.isfinite(unbiased.v)) and agrees(var, unbiased.v, tol_v) and not matches(stats.v, unbiased.v, tol_v):
        return "each batch's variance is the unbiased one (divided by b - 1) but is merged as a population variance (times b)"
    averaged = np.mean([rows.var(axis=0) for rows in parts], axis=0)
    if len(parts) > 1 and agrees(var, averaged, tol_v) and not matches(stats.v, averaged, tol_v):
        return "the batches' variances are averaged: the spread between the batch means (delta^2 n_a n_b / n) is lost"
    last = parts[-1]
    if len(parts) > 1 and agrees(mean, last.mean(axis=0), tol_m) and not matches(stats.m, last.mean(axis=0), tol_m):
        return "the statistics are those of the last batch only: earlier batches are overwritten, not merged"
    for other in (0.0, 1e-4, 1.0):
        if other != c0:
            alt = concatenation(x, batch_end, other, decay)
            if agrees(mean, alt[0], tol_m) and agrees(var, alt[1], tol_v):
                return f"the statistics start from an initial count of {other:g}, not the declared {c0:g} (moments_initial_count)"
    if len(parts) > 1:
        alt = concatenation(x, batch_end, c0, None if decay is not None else 0.9999)
        if agrees(mean, alt[0], tol_m) and agrees(var, alt[1], tol_v) and not matches(stats.v, alt[1], tol_v):
            return ("the statistics decay (earlier batches weigh less) where every sample weighs alike is declared, or the other "
                    "way round (moments_decay)")
    return ""


def naive_moments(parts, c0, decay, dtype) -> np.ndarray:
    """The variance a candidate keeping sums of x and x^2 in ``dtype`` returns (for diagnoses)."""
    d = dtype(1.0 if decay is None else decay)
    D = parts[0].shape[1]
    s1, s2, n = np.zeros(D, dtype), np.full(D, c0, dtype), dtype(c0)
    for rows in parts:
        rows = rows.astype(dtype)
        s1, s2, n = d * s1 + rows.sum(axis=0), d * s2 + (rows * rows).sum(axis=0), d * n + dtype(len(rows))
    mean = s1 / n
    return (s2 / n - mean * mean).astype(np.float64)


def check_moments(ctx, x, batch_end, *, what: str, published=None, **options):
    """running_moments on (x, batch_end) against the exact statistics of the concatenation."""
    c0, decay = initial_count(ctx), decay_of(ctx)
    mean, var, count, c, x = run_moments(ctx, x, batch_end, **options)
    u = c.unit_roundoff
    e_mean, e_var, e_count = concatenation(x, batch_end, c0, decay)
    bounds = moments_bounds(x, batch_end, c0, u, decay=decay).at(-1)
    tol_m, tol_v, tol_n = moments_tolerance(e_mean, e_var, bounds, e_count, u)
    diagnose = lambda _: diagnose_moments(x, batch_end, c0, mean, var, tol_m, tol_v, decay)
    note = count_note(ctx)
    assert_close(mean, e_mean, tol_m, what=f"{what}: the mean{note}", call=c.code, diagnose=diagnose)
    assert_close(var, e_var, tol_v, what=f"{what}: the population variance{note}", call=c.code, diagnose=diagnose)
    assert_close(count, e_count, tol_n, what=f"{what}: the count{note}", call=c.code, diagnose=diagnose)
    if published is not None:
        for name, value, tol in (("mean", mean, tol_m), ("var", var, tol_v)):
            assert_close(value, published.value(name), tol + published.published_error(name),
                         what=f"{what}: the published {name}", call=c.code, diagnose=diagnose)
    return mean, var, count


# ---------------------------------------------------------------------------------------------
# running_moments

TWO_BATCHES = contract.known_answer("normalisation.moments-two-batches")
PRIOR = contract.known_answer("normalisation.moments-prior-count")


@check("MOMENTS-CONCATENATION")
def moments_concatenation(ctx):
    """The known answer's two batches (mean [4, 1], variance [5, 5]), the same rows in other groupings, then drawn streams."""
    a = TWO_BATCHES.arrays()
    x = a["x"]
    exact_at_zero = initial_count(ctx) == 0.0 and decay_of(ctx) is None
    check_moments(ctx, x, a["batch_end"], what="two batches of two rows", published=TWO_BATCHES if exact_at_zero else None)
    for ends, label in (([True] * 4, "one row at a time (Welford)"), ([False, False, False, True], "all four at once"),
                        ([True, False, False, True], "a batch of one, then three")):
        check_moments(ctx, x, np.array(ends), what=f"the known answer's rows {label}")
    spread = np.array([[0.5, -3.0], [2.0, 7.0], [-1.5, 1.0], [3.0, 0.0], [0.25, -2.0], [1.0, 4.0]])
    check_moments(ctx, 50.0 + spread, np.array([False, False, True, False, True, True]), what="batches of 3, 2 and 1 around 50")
    ctx.property(draws.streams(), lambda s: check_moments(ctx, *s, what="a drawn stream"), label="drawn", tier="known-answers-first")


@check("MOMENTS-INITIAL-COUNT")
def moments_initial_count(ctx):
    """The declared prior's exact effect: the batch [2, 4] (2.99985000749963 and 1.00044995500337 at count 1e-4), one row, two batches."""
    a = PRIOR.arrays()
    c0 = initial_count(ctx)
    published = PRIOR if c0 == PRIOR.conventions["moments_initial_count"] and decay_of(ctx) is None else None
    check_moments(ctx, a["x"], a["batch_end"], what="the batch [2, 4] from the prior", published=published)
    check_moments(ctx, np.array([[5.0]]), np.array([True]), what="one row [5] from the prior")
    check_moments(ctx, np.array([[-3.0, 1000.0], [1.0, 1002.0]]), np.array([True, True]), what="two rows, one batch each")
    ctx.property(draws.streams(max_rows=4), lambda s: check_moments(ctx, *s, what="a short drawn stream"), label="drawn",
                 tier="known-answers-first")


LONG_ROWS, LONG_BATCH = 4096, 8
LONG_OFFSETS = (2.0**10, 2.0**20)  # spread 1: relative to the bound, meaningful in float32 and in float64


def long_stream(offset: float) -> np.ndarray:
    """4096 rows of ``offset`` plus a standard normal spread, float32 values (a fixed stream on every seed)."""
    noise = np.random.default_rng(20260101).standard_normal((LONG_ROWS, 1))
    return (offset + noise).astype(np.float32).astype(np.float64)


@check("MOMENTS-LONG-STREAM")
def moments_long_stream(ctx):
    """4096 rows of offset 2^10 and 2^20 (spread 1) in 512 batches: within Chan's running bound at the candidate's precision."""
    ends = np.zeros(LONG_ROWS, dtype=bool)
    ends[LONG_BATCH - 1::LONG_BATCH] = True
    for offset in LONG_OFFSETS:  # (the other clauses of running_moments repeat a call to see it deterministic)
        check_moments(ctx, long_stream(offset), ends, what=f"4096 rows around {offset:g} (spread 1) in batches of 8",
                      repeat=False)


# ---------------------------------------------------------------------------------------------
# merge_moments

MERGE = contract.known_answer("normalisation.merge")


def run_merge(ctx, a, b):
    (mean_a, var_a, count_a), (mean_b, var_b, count_b) = a, b
    args = {"mean_a": rounded(mean_a, ctx.dtype), "var_a": rounded(var_a, ctx.dtype), "count_a": float(count_a),
            "mean_b": rounded(mean_b, ctx.dtype), "var_b": rounded(var_b, ctx.dtype), "count_b": float(count_b)}
    c = call(ctx, "merge_moments", args, outputs=3)
    D = len(args["mean_a"])
    for name, value, shape in zip(("mean", "var", "count"), c.outputs, ((D,), (D,), ())):
        if value.shape != shape:
            raise CandidateError(f"merge_moments output {name} has shape {value.shape}; expected {shape}")
    return c.outputs[0], c.outputs[1], float(c.outputs[2]), c, args


def merge_oracle(args) -> tuple[np.ndarray, np.ndarray, float]:
    """The pairwise update in exact rationals."""
    n_a, n_b = Fraction(args["count_a"]), Fraction(args["count_b"])
    n = n_a + n_b
    means, variances = [], []
    for ma, va, mb, vb in zip(args["mean_a"], args["var_a"], args["mean_b"], args["var_b"]):
        ma, va, mb, vb = (Fraction(float(z)) for z in (ma, va, mb, vb))
        delta = mb - ma
        means.append(float(ma + delta * n_b / n))
        variances.append(float((n_a * va + n_b * vb + delta * delta * n_a * n_b / n) / n))
    return np.array(means), np.array(variances), float(n)


def check_merge(ctx, a, b, *, what: str, Ea=None, Eb=None):
    """merge_moments(a, b) against the exact pairwise update of the inputs as passed; returns the outputs and bounds."""
    mean, var, count, c, args = run_merge(ctx, a, b)
    u = c.unit_roundoff
    D = len(args["mean_a"])
    zero = np.zeros(D)
    Ea = Ea or (zero, zero, 0.0)
    Eb = Eb or (zero, zero, 0.0)
    state = Bounds(args["mean_a"], args["var_a"], args["count_a"], Ea[0], Ea[1], Ea[2])
    bounds = merge_bounds(state, args["mean_b"], args["var_b"], args["count_b"], Eb[0], Eb[1], u, En_b=Eb[2])
    e_mean, e_var, e_count = merge_oracle(args)
    tol_m, tol_v, tol_n = moments_tolerance(e_mean, e_var, bounds, e_count, u)

    def diagnose(_):
        n_a, n_b, n = args["count_a"], args["count_b"], e_count
        delta = args["mean_b"] - args["mean_a"]
        plain = (n_a * args["var_a"] + n_b * args["var_b"]) / n
        if agrees(var, plain, tol_v) and not matches(e_var, plain, tol_v):
            return "the cross term delta^2 n_a n_b / n is missing from the merged variance"
        if agrees(var, plain + delta**2 * n_a * n_b / n**2 / n, tol_v) and not matches(e_var, plain + delta**2 * n_a * n_b / n**3, tol_v):
            return "the cross term is divided by n once too often"
        if agrees(mean, args["mean_a"] + delta * n_a / n, tol_m) and not matches(e_mean, args["mean_a"] + delta * n_a / n, tol_m):
            return "the new mean moves by delta n_a / n: the counts are swapped"
        return ""

    assert_close(mean, e_mean, tol_m, what=f"{what}: the merged mean", call=c.code, diagnose=diagnose)
    assert_close(var, e_var, tol_v, what=f"{what}: the merged variance", call=c.code, diagnose=diagnose)
    assert_close(count, e_count, tol_n, what=f"{what}: the merged count", call=c.code)
    return (mean, var, count), (bounds.Em + tol_m, bounds.Ev + tol_v, bounds.En + tol_n), c


def sample_statistics(rows):
    rows = np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)
    return rows.mean(axis=0), rows.var(axis=0), float(len(rows))


@check("MOMENTS-MERGE")
def moments_merge(ctx):
    """The known answer (count 4, mean 1.75, variance 3.4375), both orders, and three samples merged along both trees."""
    a = MERGE.arrays()
    left = (a["mean_a"], a["var_a"], a["count_a"])
    right = (a["mean_b"], a["var_b"], a["count_b"])
    (mean, var, count), _, c = check_merge(ctx, left, right, what="the known answer")
    # every input and intermediate of Chan's formula here is dyadic, so the arithmetic is exact in either precision; one ulp
    # (2 u |x|) admits a form that rounds its output once (a reciprocal count, a fused product), as every bound does
    expected = np.array([MERGE.value("mean")[0], MERGE.value("var")[0], MERGE.value("count")])
    assert_close([mean[0], var[0], count], expected, 2 * c.unit_roundoff * np.abs(expected),
                 what="the known answer (dyadic: exact to the output's rounding in every precision)", call=c.code)
    check_merge(ctx, right, left, what="the known answer, the other way round")
    base = {"mean_a": left[0], "var_a": left[1], "count_a": left[2], "mean_b": right[0], "var_b": right[1], "count_b": right[2]}
    for args, label in edges.cases("merge_moments", base, "count_a", "count_b"):  # a prior's tiny count, a single sample
        check_merge(ctx, (args["mean_a"], args["var_a"], args["count_a"]), (args["mean_b"], args["var_b"], args["count_b"]),
                    what=f"the known answer at the {label}")
    samples = ([[1.0, -4.0], [2.0, 6.0], [6.0, 0.5]], [[10.0, 1.0]], [[-2.0, 3.0], [0.5, 3.0]])
    rows = [np.array(s) for s in samples]
    stats = [sample_statistics(r) for r in rows]  # each exact: dyadic data
    whole = concatenation(np.concatenate(rows), np.ones(6, dtype=bool), 0.0)
    for order, label in (((0, 1, 2), "((a, b), c)"), ((1, 2, 0), "((b, c), a)")):
        inner, inner_bound, _ = check_merge(ctx, stats[order[0]], stats[order[1]], what=f"{label}: the inner merge")
        outer, outer_bound, c = check_merge(ctx, inner, stats[order[2]], what=f"{label}: the outer merge", Ea=inner_bound)
        assert_close(outer[0], whole[0], outer_bound[0] + ORACLE * np.abs(whole[0]), what=f"{label}: the mean of the concatenation",
                     call=c.code)
        assert_close(outer[1], whole[1], outer_bound[1] + ORACLE * np.abs(whole[1]), what=f"{label}: the variance of the concatenation",
                     call=c.code)
    ctx.property(draws.statistics_pairs(), lambda pair: check_merge(ctx, *pair, what="drawn statistics"), label="drawn",
                 tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# normalize_observations and scale_rewards: the shared conventions


@dataclasses.dataclass(frozen=True)
class Normaliser:
    """The conventions a normaliser is judged under."""

    count0: float
    eps: float
    form: str
    clip: float | None
    order: str
    scope: str
    decay: float | None = None

    def denominator(self, v):
        if self.form == "variance":
            return np.sqrt(v + self.eps)
        if self.form == "std":
            return np.sqrt(v) + self.eps
        return np.maximum(np.sqrt(v), self.eps)

    def denominator_error(self, v, Ev, u):
        d = self.denominator(v)
        if self.form == "variance":
            return (Ev + u * (v + self.eps)) / (2 * d) + u * d
        root = np.sqrt(v)
        with np.errstate(divide="ignore", invalid="ignore"):
            smooth = np.where(root > 0, Ev / (2 * np.where(root > 0, root, 1.0)), np.inf)
        return np.minimum(smooth, np.sqrt(Ev)) + u * (root + d)

    def describe(self, default: "Normaliser") -> str:
        changed = [f"{k} {getattr(self, k)!r}" for k in ("count0", "decay", "eps", "form", "clip", "order", "scope")
                   if getattr(self, k) != getattr(default, k)]
        return f" (declared: {', '.join(changed)})" if changed else ""


NORMALISER_KEYS = ("moments_initial_count", "normalization_eps", "normalization_eps_form", "{clip}", "normalization_order",
                   "normalization_scope", "moments_decay")


def normaliser(ctx, clip_key: str) -> Normaliser:
    c0, eps, form, clip, order, scope, decay = (ctx.convention(k.format(clip=clip_key)) for k in NORMALISER_KEYS)
    return Normaliser(float(c0), float(eps), form, clip, order, scope, None if decay is None else float(decay))


def default_normaliser(ctx, clip_key: str) -> Normaliser:
    return Normaliser(*(ctx.default(k.format(clip=clip_key)) for k in NORMALISER_KEYS))


def normalised(x, m, v, Em, Ev, rule: Normaliser, u):
    """``(y, tol)``: clip((x - m) / d) and its tolerance (module docstring), elementwise over broadcast shapes."""
    d = rule.denominator(v)
    y = (x - m) / d
    Ed = rule.denominator_error(v, Ev, u)
    with np.errstate(divide="ignore", invalid="ignore"):
        Ey = np.where(Ed < d, (Em + u * np.abs(x - m) + np.abs(y) * Ed) / (d - Ed) + u * np.abs(y), np.inf)
    Ey = Ey + ORACLE * np.abs(y) + 4 * smallest_normal(u) + TINY
    if rule.clip is not None:
        y = np.clip(y, -rule.clip, rule.clip)
    return y, Ey


# ---------------------------------------------------------------------------------------------
# normalize_observations

OBSERVATIONS = contract.known_answer("normalisation.observations")
BEYOND_CLIP = contract.known_answer("normalisation.observations-beyond-the-clip")


def observation_oracle(obs, train_steps, rule: Normaliser, u, *, evaluation_updates=False):
    """``(expected, tol)`` (T, N, D) for the declared conventions (``evaluation_updates``: the wrong statistics a
    candidate updating in evaluation mode would use, for diagnoses)."""
    T, N, D = obs.shape
    expected, tol = np.empty_like(obs), np.empty_like(obs)
    updates = T if evaluation_updates else train_steps
    groups = [list(range(N))] if rule.scope == "shared" else [[j] for j in range(N)]
    for columns in groups:
        states = stepwise([obs[t, columns] for t in range(updates)], D, rule.count0, u, decay=rule.decay)  # after k updates
        for t in range(T):
            k = min(t + 1, updates)
            if t < updates and rule.order == "normalise-then-update":
                k = t
            m, v, Em, Ev = states[k]
            expected[t, columns], tol[t, columns] = normalised(obs[t, columns], m, v, Em, Ev, rule, u)
    return expected, tol


def naive_observations(obs, train_steps, rule: Normaliser) -> np.ndarray:
    """What a normaliser keeping float32 sums of x and x^2 outputs (for diagnoses)."""
    T, N, D = obs.shape
    out = np.empty_like(obs)
    groups = [list(range(N))] if rule.scope == "shared" else [[j] for j in range(N)]
    f32 = np.float32
    d = f32(1.0 if rule.decay is None else rule.decay)
    for columns in groups:
        s1, s2, n = np.zeros(D, f32), np.full(D, rule.count0, f32), f32(rule.count0)
        for t in range(T):
            rows = obs[t, columns].astype(f32)
            before = (s1, s2, n)
            if t < train_steps:
                s1, s2, n = d * s1 + rows.sum(axis=0), d * s2 + (rows * rows).sum(axis=0), d * n + f32(len(rows))
            a1, a2, m = before if rule.order == "normalise-then-update" and t < train_steps else (s1, s2, n)
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = (a1 / m).astype(np.float64) if m else np.zeros(D)
                var = (a2 / m - (a1 / m) ** 2).astype(np.float64) if m else np.ones(D)
                y = (obs[t, columns] - mean) / rule.denominator(np.maximum(var, 0.0))
            out[t, columns] = y if rule.clip is None else np.clip(y, -rule.clip, rule.clip)
    return out


def late_corrected_observations(obs, train_steps, rule: Normaliser) -> np.ndarray:
    """What a normaliser keeping moving averages of x and x^2 (weight 1 - d per update) outputs when it subtracts the
    squared mean before the bias correction 1 - d^count (for diagnoses; each batch row by row, as per environment)."""
    T, N, D = obs.shape
    d = float(rule.decay)
    out = np.empty_like(obs)
    groups = [list(range(N))] if rule.scope == "shared" else [[j] for j in range(N)]
    for columns in groups:
        raw1, raw2, count = np.zeros((len(columns), D)), np.zeros((len(columns), D)), 0
        for t in range(T):
            rows = obs[t, columns]
            if t < train_steps:
                raw1, raw2, count = raw1 + (1 - d) * (rows - raw1), raw2 + (1 - d) * (rows**2 - raw2), count + 1
            correction = 1 - d**count
            with np.errstate(invalid="ignore", divide="ignore"):
                loc, var = raw1 / correction, (raw2 - raw1**2) / correction
                y = (rows - loc) / rule.denominator(np.maximum(var, 0.0))
            out[t, columns] = y if rule.clip is None else np.clip(y, -rule.clip, rule.clip)
    return out


def unbiased_batches_observations(obs, train_steps, rule: Normaliser) -> np.ndarray:
    """What a normaliser whose batches' variances are unbiased (n - 1) but merged as population variances outputs
    (float64, for diagnoses; NaN where a batch has one row)."""
    T, N, D = obs.shape
    out = np.empty_like(obs)
    groups = [list(range(N))] if rule.scope == "shared" else [[j] for j in range(N)]
    zero = np.zeros(D)
    for columns in groups:
        state = Bounds.start(D, rule.count0, 0.0)
        for t in range(T):
            before = state
            rows = obs[t, columns]
            if t < train_steps:
                with np.errstate(invalid="ignore", divide="ignore"):
                    v_b = rows.var(axis=0, ddof=1) if len(rows) > 1 else np.full(D, np.nan)
                state = merge_bounds(state, rows.mean(axis=0), v_b, len(rows), zero, zero, 0.0, decay=rule.decay)
            use = before if rule.order == "normalise-then-update" and t < train_steps else state
            with np.errstate(invalid="ignore"):
                y = (rows - use.m) / rule.denominator(use.v)
            out[t, columns] = y if rule.clip is None else np.clip(y, -rule.clip, rule.clip)
    return out


def run_observations(ctx, obs, train_steps):
    obs = rounded(np.asarray(obs, dtype=np.float64), ctx.dtype)
    c = call(ctx, "normalize_observations", {"obs": obs, "train_steps": int(train_steps)}, shape=obs.shape)
    return c.outputs[0], c, obs


def diagnose_observations(actual, obs, train_steps, rule: Normaliser, tol) -> str:
    right, _ = observation_oracle(obs, train_steps, rule, 0.0)
    if rule.decay is not None:
        late = late_corrected_observations(obs, train_steps, rule)
        off = np.abs(late - right)  # float32 rounding is amplified by 1 / (1 - d): the error need only be of this kind
        if np.any(off > tol) and np.all(np.abs(actual - late) <= np.maximum(0.5 * off, tol)):
            return ("the exponential moving averages of x and x^2 are bias-corrected after forming E[x^2] - E[x]^2: the "
                    "variance keeps decay^count times the squared mean (it must be E_c[x^2] - E_c[x]^2 of the corrected "
                    "averages)")
    alternatives = []
    for field, value, cause in (
        ("order", "normalise-then-update" if rule.order == "update-then-normalise" else "update-then-normalise",
         "each training step is normalised with the statistics from before it (or after): the order differs from the declared normalization_order"),
        ("scope", "per-environment" if rule.scope == "shared" else "shared",
         "each environment is normalised by its own statistics where shared ones are declared (or the other way round): normalization_scope"),
        ("form", "std" if rule.form != "std" else "variance", "the epsilon is added to the std, not the variance: normalization_eps_form"),
        ("clip", None if rule.clip is not None else 10.0, "the clip differs from the declared observation_clip"),
    ):
        alternatives.append((dataclasses.replace(rule, **{field: value}), cause))
    for count in (0.0, 1e-4, 1.0):
        if count != rule.count0:
            alternatives.append((dataclasses.replace(rule, count0=count),
                                 f"the statistics start from an initial count of {count:g}, not the declared {rule.count0:g}"))
    for other, cause in alternatives:
        wrong, _ = observation_oracle(obs, train_steps, other, 0.0)
        right, _ = observation_oracle(obs, train_steps, rule, 0.0)
        if agrees(actual, wrong, tol) and not matches(right, wrong, tol):
            return cause
    if train_steps < len(obs):
        wrong, _ = observation_oracle(obs, train_steps, rule, 0.0, evaluation_updates=True)
        right, _ = observation_oracle(obs, train_steps, rule, 0.0)
        if agrees(actual, wrong, tol) and not matches(right, wrong, tol):
            return "the statistics are updated in evaluation mode (steps from train_steps on)"
    right, _ = observation_oracle(obs, train_steps, rule, 0.0)
    naive = naive_observations(obs, train_steps, rule)
    off = np.abs(naive - right)
    if np.any(off > tol) and np.all(np.abs(actual - naive) <= np.maximum(0.5 * off, tol)):
        return ("the variance is E[x^2] - E[x]^2 from running float32 sums (catastrophic cancellation when the mean is "
                "large against the spread): use Chan's or Welford's update")
    unbiased = unbiased_batches_observations(obs, train_steps, rule)
    if np.all(np.isfinite(unbiased)) and agrees(actual, unbiased, tol) and not matches(right, unbiased, tol):
        return ("each step's batch variance is the unbiased one (divided by n - 1) but is merged as a population "
                "variance: the running variance overstates the spread")
    clipped = obs if rule.clip is None else np.clip(obs, -rule.clip, rule.clip)
    if rule.clip is not None:
        wrong, _ = observation_oracle(clipped, train_steps, rule, 0.0)
        right, _ = observation_oracle(obs, train_steps, rule, 0.0)
        if agrees(actual, wrong, tol) and not matches(right, wrong, tol):
            return "the raw observations are clipped before the statistics see them"
    return ""


def check_observations(ctx, obs, train_steps, *, what: str, published=None, cause: str = ""):
    rule = normaliser(ctx, "observation_clip")
    actual, c, obs = run_observations(ctx, obs, train_steps)
    expected, tol = observation_oracle(obs, train_steps, rule, c.unit_roundoff)
    note = rule.describe(default_normaliser(ctx, "observation_clip"))
    assert_close(actual, expected, tol, what=f"{what}{note}", call=c.code, cause=cause,
                 diagnose=lambda a: diagnose_observations(a, obs, train_steps, rule, tol))
    if published is not None and rule == default_normaliser(ctx, "observation_clip"):
        assert_close(actual, published.value("normalized"), tol + published.published_error("normalized"),
                     what=f"{what}: the published values", call=c.code)
    return actual, expected


@check("OBS-NORM-VALUES")
def observation_values(ctx):
    """The known answer (-0.999999995, 0.447213595053, ...), a first step alone, features of different scales, then drawn streams."""
    a = OBSERVATIONS.arrays()
    check_observations(ctx, a["obs"], a["train_steps"], what="the known answer", published=OBSERVATIONS)
    check_observations(ctx, np.array([[[3.0, -1.0]]]), 1, what="one environment's first step")
    obs = np.array([[[1.0, 100.0], [2.0, 300.0]], [[4.0, -200.0], [0.0, 0.0]], [[1.0, 50.0], [3.0, 250.0]]])
    check_observations(ctx, obs, 3, what="two features of different scales")
    ctx.property(draws.observation_streams(), lambda s: check_observations(ctx, *s, what="a drawn stream"), label="drawn",
                 tier="known-answers-first")


@check("OBS-NORM-CLIP-AFTER-STATISTICS")
def observation_clip_after_statistics(ctx):
    """Observations of 100 and 300 (beyond any clip) train mean 200, variance 10^4; 3000 in evaluation is clipped at the output."""
    a = BEYOND_CLIP.arrays()
    check_observations(ctx, a["obs"], a["train_steps"], what="observations beyond the clip", published=BEYOND_CLIP,
                       cause="the clip is applied before the statistics see the observations")
    obs = np.array([[[-50.0], [50.0]], [[-40.0], [60.0]], [[0.0], [1000.0]]])
    check_observations(ctx, obs, 2, what="training observations of +-50, an evaluation outlier of 1000")

    def drawn(stream):
        obs, steps = stream
        check_observations(ctx, obs * 25.0, steps, what="a drawn stream scaled beyond the clip")

    ctx.property(draws.observation_streams(), drawn, label="drawn", tier="known-answers-first")


@check("OBS-NORM-EVALUATION-FROZEN")
def observation_evaluation_frozen(ctx):
    """Evaluation steps use the statistics training left (-1.788854380211 in the known answer), whatever they observe."""
    a = OBSERVATIONS.arrays()
    check_observations(ctx, a["obs"], a["train_steps"], what="the known answer's evaluation step", published=OBSERVATIONS)
    obs = np.array([[[1.0, 0.0]], [[3.0, 2.0]], [[100.0, -50.0]], [[-7.0, 4.0]], [[2.0, 1.0]]])
    check_observations(ctx, obs, 2, what="three evaluation steps after two training steps",
                       cause="the statistics are updated in evaluation mode")
    check_observations(ctx, obs, 1, what="four evaluation steps after one training step",
                       cause="the statistics are updated in evaluation mode")

    def drawn(stream):
        obs, steps = stream
        if len(obs) > 1:
            check_observations(ctx, obs, min(steps, len(obs) - 1), what="a drawn stream with an evaluation step")

    ctx.property(draws.observation_streams(), drawn, label="drawn", tier="known-answers-first")


@check("OBS-NORM-ENVIRONMENTS")
def observation_environments(ctx):
    """Three environments of different scales, two features: the declared scope, features never mixed, environments reordered."""
    obs = np.array([[[1.0, 10.0], [5.0, 30.0], [100.0, -20.0]],
                    [[2.0, 12.0], [3.0, 28.0], [90.0, -10.0]],
                    [[0.0, 11.0], [4.0, 31.0], [110.0, -15.0]]])
    check_observations(ctx, obs, 3, what="three environments, two features",
                                   cause="the statistics are not one set per feature over the environments declared")
    check_observations(ctx, obs[:, [2, 0, 1]], 3, what="the same environments reordered")
    check_observations(ctx, obs[:, :, ::-1], 3, what="the same features reordered")
    for steps in edges.values("normalize_observations", "train_steps"):  # 1: one training step, then the frozen statistics
        check_observations(ctx, obs, steps, what=f"three environments, {steps} training step(s), then evaluation")

    def drawn(stream):
        obs, steps = stream
        if obs.shape[1] > 1:
            check_observations(ctx, obs, steps, what="a drawn stream of several environments")

    ctx.property(draws.observation_streams(), drawn, label="drawn", tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# scale_rewards

REWARDS = contract.known_answer("normalisation.rewards")


def accumulators(rewards, terminated, truncated, gamma, *, reset="both"):
    """The exact return accumulators (T, N) as rationals; ``reset`` names a wrong rule for diagnoses:
    "terminated", "truncated", "none", "same-step" (the history zeroed by the step's own terminated flag, never
    reset after) or "same-step-reset" (that, and reset after every end)."""
    g = Fraction(float(gamma))
    T, N = rewards.shape
    out = [[None] * N for _ in range(T)]
    running = [Fraction(0)] * N
    for t in range(T):
        for j in range(N):
            r = Fraction(float(rewards[t, j]))
            ends = {"both": terminated[t, j] or truncated[t, j], "terminated": terminated[t, j],
                    "truncated": truncated[t, j], "none": False, "same-step": False,
                    "same-step-reset": terminated[t, j] or truncated[t, j]}[reset]
            own_flag = reset.startswith("same-step") and terminated[t, j]
            history = Fraction(0) if own_flag else running[j]
            running[j] = g * history + r
            out[t][j] = running[j]
            if ends:
                running[j] = Fraction(0)
    return out


def reward_oracle(rewards, terminated, truncated, gamma, rule: Normaliser, u, *, reset="both", statistic="return"):
    """``(expected, tol)`` (T, N); ``reset`` and ``statistic`` ("return", "reward", "centred") name wrong rules."""
    T, N = rewards.shape
    R = np.array([[float(x) for x in row] for row in accumulators(rewards, terminated, truncated, gamma, reset=reset)])
    ends = terminated | truncated
    ER = np.zeros((T, N))  # an accumulator restarted after an end carries no error from before it
    for t in range(T):
        kept = np.where(ends[t - 1], 0.0, 1.0) if t else np.zeros(N)
        ER[t] = kept * (abs(gamma) * ER[t - 1] + 3 * u * np.abs(gamma * R[t - 1])) + u * np.abs(R[t]) if t else u * np.abs(R[t])
    ER += U64 * np.abs(R)  # the oracle's accumulators are the exact ones rounded to float64 once
    source, source_errors = (rewards, np.zeros((T, N))) if statistic == "reward" else (R, ER)
    expected, tol = np.empty((T, N)), np.empty((T, N))
    groups = [list(range(N))] if rule.scope == "shared" else [[j] for j in range(N)]
    for columns in groups:
        states = stepwise([source[t, columns][:, None] for t in range(T)], 1, rule.count0, u,
                          [source_errors[t, columns][:, None] for t in range(T)], decay=rule.decay)
        for t in range(T):
            m, v, Em, Ev = states[t if rule.order == "normalise-then-update" else t + 1]
            centre, Ec = (m, Em) if statistic == "centred" else (0.0, 0.0)
            expected[t, columns], tol[t, columns] = normalised(rewards[t, columns], centre, v, Ec, Ev, rule, u)
    return expected, tol


def run_rewards(ctx, rewards, terminated, truncated, gamma):
    rewards = rounded(np.asarray(rewards, dtype=np.float64), ctx.dtype)
    args = {"rewards": rewards, "terminated": np.asarray(terminated, dtype=bool), "truncated": np.asarray(truncated, dtype=bool),
            "gamma": float(gamma)}
    c = call(ctx, "scale_rewards", args, shape=rewards.shape)
    return c.outputs[0], c, rewards


def diagnose_rewards(actual, rewards, terminated, truncated, gamma, rule, tol) -> str:
    """The known wrong rules whose outputs the candidate's match (several can agree on one input: all are named)."""
    right, _ = reward_oracle(rewards, terminated, truncated, gamma, rule, 0.0)
    causes = []
    for kwargs, cause in (
        ({"statistic": "reward"}, "the rewards are divided by their own running std, not the discounted return's"),
        ({"statistic": "centred"}, "the rewards are centred by the return's running mean: reward scaling divides only"),
        ({"reset": "same-step"}, "the accumulator's history is zeroed by the terminated step's own flag (R_t = gamma (1 - "
                                 "terminated_t) R_{t-1} + r_t): the terminal step loses its episode's return, the next "
                                 "episode inherits gamma r_t, and a truncation never resets it"),
        ({"reset": "same-step-reset"}, "the terminated step's own flag zeroes the accumulator's history (R_t = gamma (1 - "
                                       "terminated_t) R_{t-1} + r_t): the terminal step's statistic is r_t alone, not its "
                                       "episode's discounted return"),
        ({"reset": "none"}, "the accumulator is never reset at episode ends"),
        ({"reset": "terminated"}, "the accumulator is reset on terminated only: after a time limit the next episode inherits the previous return"),
        ({"reset": "truncated"}, "the accumulator is reset on truncated only: after a termination the next episode inherits the previous return"),
    ):
        wrong, _ = reward_oracle(rewards, terminated, truncated, gamma, rule, 0.0, **kwargs)
        if agrees(actual, wrong, tol) and not matches(right, wrong, tol):
            causes.append(cause)
    if rule.clip is not None and not causes:
        wrong, _ = reward_oracle(np.clip(rewards, -rule.clip, rule.clip), terminated, truncated, gamma, rule, 0.0)
        if agrees(actual, wrong, tol) and not matches(right, wrong, tol):
            causes.append("the rewards are clipped before the return statistics see them")
    return "; or ".join(causes) + (" (these agree on this input)" if len(causes) > 1 else "")


def check_rewards(ctx, rewards, terminated, truncated, gamma, *, what: str, published=None, cause: str = ""):
    rule = normaliser(ctx, "reward_clip")
    actual, c, rewards = run_rewards(ctx, rewards, terminated, truncated, gamma)
    terminated, truncated = np.asarray(terminated, dtype=bool), np.asarray(truncated, dtype=bool)
    expected, tol = reward_oracle(rewards, terminated, truncated, gamma, rule, c.unit_roundoff)
    note = rule.describe(default_normaliser(ctx, "reward_clip"))
    assert_close(actual, expected, tol, what=f"{what}{note}", call=c.code, cause=cause,
                 diagnose=lambda a: diagnose_rewards(a, rewards, terminated, truncated, gamma, rule, tol))
    if published is not None and rule == default_normaliser(ctx, "reward_clip"):
        assert_close(actual, published.value("scaled"), tol + published.published_error("scaled"),
                     what=f"{what}: the published values", call=c.code)


def _no_ends(shape):
    return np.zeros(shape, dtype=bool)


@check("REWARD-SCALE-RETURN-STD")
def reward_return_std(ctx):
    """Rewards divided by the running std of R_t = gamma R_{t-1} + r_t (3.99999968 at step 1 of the known answer), not centred."""
    a = REWARDS.arrays()
    check_rewards(ctx, a["rewards"][:, :1], _no_ends((3, 1)), _no_ends((3, 1)), a["gamma"], what="the known answer's first column",
                  cause="the rewards are not divided by the discounted return's running std")
    rewards = np.array([[2.0, -1.0], [3.0, 0.5], [1.0, 4.0], [-2.0, 2.0], [5.0, 1.0]])
    check_rewards(ctx, rewards, _no_ends(rewards.shape), _no_ends(rewards.shape), 0.9, what="rewards of non-zero mean, gamma 0.9")
    check_rewards(ctx, rewards * 30.0, _no_ends(rewards.shape), _no_ends(rewards.shape), 0.99, what="large rewards, gamma 0.99")
    for gamma in edges.values("scale_rewards", "gamma"):  # 0: the accumulator is the reward itself; 1: the undiscounted sum
        check_rewards(ctx, rewards, _no_ends(rewards.shape), _no_ends(rewards.shape), gamma, what=f"rewards of non-zero mean, gamma {gamma:g}")

    def drawn(stream):
        rewards, _, _, gamma = stream
        check_rewards(ctx, rewards, _no_ends(rewards.shape), _no_ends(rewards.shape), gamma, what="a drawn stream without episode ends")

    ctx.property(draws.reward_streams(), drawn, label="drawn", tier="known-answers-first")


def _reset_case(kind: str):
    """Rewards 1 2 3 4 5 in one environment (gamma 0.9) with an end of ``kind`` after step 1, beside an environment without."""
    rewards = np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0], [4.0, 1.0], [5.0, 1.0]])
    flags = _no_ends(rewards.shape)
    flags[1, 0] = True
    return rewards, (flags if kind == "terminated" else _no_ends(rewards.shape)), (flags if kind == "truncated" else _no_ends(rewards.shape))


def reset_check(ctx, kind: str):
    a = REWARDS.arrays()
    column = 1 if kind == "terminated" else 2
    pick = [0, column]
    check_rewards(ctx, a["rewards"][:, pick], a["terminated"][:, pick], a["truncated"][:, pick], a["gamma"],
                  what=f"the known answer's {kind} column beside the uninterrupted one",
                  cause=f"the return accumulator is not reset after a {kind} step")
    if normaliser(ctx, "reward_clip") == default_normaliser(ctx, "reward_clip"):
        check_rewards(ctx, a["rewards"], a["terminated"], a["truncated"], a["gamma"], what="the known answer", published=REWARDS)
    check_rewards(ctx, *_reset_case(kind), 0.9, what=f"rewards 1..5 with a {kind} end after step 1, gamma 0.9",
                  cause=f"the return accumulator is not reset after a {kind} step")
    for gamma in edges.values("scale_rewards", "gamma"):  # 1: the episode's whole sum is carried unless reset; 0: nothing is
        check_rewards(ctx, *_reset_case(kind), gamma, what=f"rewards 1..5 with a {kind} end after step 1, gamma {gamma:g}",
                      cause=f"the return accumulator is not reset after a {kind} step")

    def drawn(stream):
        rewards, terminated, truncated, gamma = stream
        ends = terminated | truncated
        flags = (ends, _no_ends(ends.shape)) if kind == "terminated" else (_no_ends(ends.shape), ends)
        check_rewards(ctx, rewards, *flags, gamma, what=f"a drawn stream with {kind} ends")

    ctx.property(draws.reward_streams(), drawn, label="drawn", tier="known-answers-first")


@check("REWARD-SCALE-RESET-TERMINATED")
def reward_reset_terminated(ctx):
    """After a terminated step the accumulator restarts (1, 1.5, 1 with gamma 1/2), and the terminal step keeps its episode's return."""
    reset_check(ctx, "terminated")


@check("REWARD-SCALE-RESET-TRUNCATED")
def reward_reset_truncated(ctx):
    """After a truncated step the accumulator restarts too (1, 1.5, 1 with gamma 1/2)."""
    reset_check(ctx, "truncated")


# ---------------------------------------------------------------------------------------------
# the diagnostics: averaging over minibatches


def average_mode(ctx) -> str:
    return ctx.convention("diagnostic_average")


def segments(minibatch_end):
    start = 0
    for end in np.flatnonzero(minibatch_end):
        yield slice(start, end + 1)
        start = end + 1


def averaged(per_sample, minibatch_end, mode: str) -> float:
    """The mean of ``per_sample`` as the declared averaging takes it (minibatch_end None: one minibatch)."""
    per_sample = np.asarray(per_sample, dtype=np.float64)
    if minibatch_end is None or mode in ("samples", "per-call"):
        return math.fsum(per_sample) / len(per_sample)
    means = [math.fsum(per_sample[s]) / len(per_sample[s]) for s in segments(minibatch_end)]
    if mode == "last-minibatch":
        return means[-1]
    return math.fsum(means) / len(means)


def averaging_tolerance(per_sample, per_sample_tol, minibatch_end, u) -> float:
    """The mean of the per-sample tolerances plus the sums' roundings (module docstring)."""
    B = len(per_sample)
    M = 1 if minibatch_end is None else int(np.count_nonzero(minibatch_end))
    magnitude = float(np.max(np.abs(per_sample))) if B else 0.0
    return float(np.max(per_sample_tol)) + 2 * 2 * (B + M + 2) * u * magnitude + 4 * smallest_normal(u) + TINY


def minibatch_argument(ctx, minibatch_end):
    """What the candidate receives as minibatch_end: None for a candidate that averages nothing (per-call)."""
    if average_mode(ctx) == "per-call":
        return None
    return minibatch_end


AVERAGING_CASE = np.array([False, False, True, True])  # minibatches of 3 and 1: every averaging differs


# ---------------------------------------------------------------------------------------------
# diagnostic_approx_kl

RATIO_PAIR = contract.known_answer("normalisation.approx-kl-ratio-pair")
CATEGORICAL = contract.known_answer("normalisation.approx-kl-categorical")


def estimator(ctx) -> str:
    return ctx.convention("approx_kl_estimator")


def run_approx_kl(ctx, logp_new, logp_old, minibatch_end=None):
    new, old = rounded(logp_new, ctx.dtype), rounded(logp_old, ctx.dtype)
    args = {"logp_new": new, "logp_old": old, "minibatch_end": None if minibatch_end is None else np.asarray(minibatch_end, dtype=bool)}
    c = call(ctx, "diagnostic_approx_kl", args, shape=())
    return float(c.outputs[0]), c, new, old


def check_approx_kl(ctx, logp_new, logp_old, minibatch_end=None, *, what: str, mode: str = "samples", published=None):
    kind = estimator(ctx)
    value, c, new, old = run_approx_kl(ctx, logp_new, logp_old, minibatch_end)
    per_sample = kl_exact(kind, old, new)  # sampler: pi_old; other: pi_new
    expected = averaged(per_sample, minibatch_end, mode)
    tol = averaging_tolerance(per_sample, per_sample_tolerance(kind, old, new, c.unit_roundoff), minibatch_end, c.unit_roundoff)

    def diagnose(v):
        for other in ("k1", "k2", "k3"):
            alt = averaged(kl_exact(other, old, new), minibatch_end, mode)
            if other != kind and agrees(v, alt, tol) and not matches(expected, alt, tol):
                return f"diagnostic_approx_kl averages {other}, not the declared {kind} (approx_kl_estimator)"
        reversed_ = averaged(kl_exact(kind, new, old), minibatch_end, mode)
        if agrees(v, reversed_, tol) and not matches(expected, reversed_, tol):
            return "the log ratio is taken the other way round (logp_old - logp_new)"
        if minibatch_end is not None:
            for other in ("samples", "minibatches", "last-minibatch"):
                alt = averaged(per_sample, minibatch_end, other)
                if other != mode and agrees(v, alt, tol) and not matches(expected, alt, tol):
                    return f"the minibatches are averaged as {other!r}, not as declared ({mode!r}, diagnostic_average)"
        return ""

    declared = "" if kind == "k3" else f" (declared approx_kl_estimator {kind})"
    assert_close(value, expected, tol, what=f"{what}: mean {kind}{declared}", call=c.code, diagnose=diagnose)
    if published is not None:
        assert_close(value, published, tol + 5e-16, what=f"{what}: the published {kind}", call=c.code, diagnose=diagnose)
    return value, tol


@check("APPROX-KL-ESTIMATOR")
def approx_kl_estimator(ctx):
    """Ratios 2 and 1/2: 1/4 for k3, 0 for k1, 0.2402 for k2; minibatches averaged as declared; drawn batches."""
    kind, mode = estimator(ctx), average_mode(ctx)
    a = RATIO_PAIR.arrays()
    published = {"k3": RATIO_PAIR.value("kl"), "k1": RATIO_PAIR.value("k1"), "k2": RATIO_PAIR.value("k2")}[kind]
    check_approx_kl(ctx, a["logp_new"], a["logp_old"], what="ratios 2 and 1/2", published=published)
    new, old = np.array([-0.5, -2.0, -0.25, -1.0]), np.array([-1.5, -2.0, -1.0, -3.0])
    check_approx_kl(ctx, new, old, what="log ratios 1, 0, 0.75, 2 in one minibatch")
    if mode != "per-call":
        check_approx_kl(ctx, new, old, AVERAGING_CASE, what="minibatches of 3 and 1", mode=mode)

    def drawn(batch):
        new, old, ends = batch
        check_approx_kl(ctx, new, old, minibatch_argument(ctx, ends), what="a drawn batch", mode=mode)

    ctx.property(draws.ratio_batches(), drawn, label="drawn", tier="known-answers-first")


@check("APPROX-KL-DIRECTION")
def approx_kl_direction(ctx):
    """Ten samples of p = [0.2, 0.3, 0.5] against q = [0.4, 0.4, 0.2]: KL(p || q) = 0.23321131 (k1, k3), not KL(q || p)."""
    kind = estimator(ctx)
    a = CATEGORICAL.arrays()
    published = CATEGORICAL.value("k2") if kind == "k2" else CATEGORICAL.value("kl")
    value, tol = check_approx_kl(ctx, a["logp_new"], a["logp_old"], what="ten samples of pi_old = p, pi_new = q")
    assert_close(value, published, tol + CATEGORICAL.published_error("kl"), what=f"mean {kind} vs the published {published}",
                 cause="the log ratio is taken the other way round: the mean estimates KL(pi_new || pi_old)-like values")
    for log_r in (1.0, -1.0, 3.0):
        check_approx_kl(ctx, np.array([-2.0 + log_r]), np.array([-2.0]), what=f"one sample with log r = {log_r:g}")

    def drawn(case):
        counts, logits = case
        p = counts / counts.sum()
        log_q = logits - np.log(np.sum(np.exp(logits - logits.max()))) - logits.max()
        samples = np.repeat(np.arange(len(p)), counts)  # the sampler's outcomes in its exact proportions
        check_approx_kl(ctx, log_q[samples], np.log(p)[samples], what="16 samples in the sampler's proportions")

    ctx.property(draws.sampled_categoricals(), drawn, label="drawn", tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# diagnostic_clip_fraction

CLIP_FRACTION = contract.known_answer("normalisation.clip-fraction")
FIRST_MINIBATCH = contract.known_answer("normalisation.clip-fraction-first-minibatch")


def run_clip_fraction(ctx, logp_new, logp_old, clip_eps, minibatch_end=None):
    new, old = rounded(logp_new, ctx.dtype), rounded(logp_old, ctx.dtype)
    args = {"logp_new": new, "logp_old": old, "clip_eps": float(clip_eps),
            "minibatch_end": None if minibatch_end is None else np.asarray(minibatch_end, dtype=bool)}
    c = call(ctx, "diagnostic_clip_fraction", args, shape=())
    return float(c.outputs[0]), c, new, old


def near_boundary(new, old, clip_eps, u) -> np.ndarray:
    """Samples whose |r - 1| is within rounding of clip_eps in precision u (module docstring)."""
    r = np.exp(new - old)
    return np.abs(np.abs(r - 1.0) - clip_eps) <= 8 * u * (r + 1.0 + clip_eps) + 2 * u * np.abs(new - old) * r


def check_clip_fraction(ctx, logp_new, logp_old, clip_eps, minibatch_end=None, *, what: str, mode: str = "samples",
                        decided: bool = False):
    value, c, new, old = run_clip_fraction(ctx, logp_new, logp_old, clip_eps, minibatch_end)
    u = c.unit_roundoff
    if not decided and np.any(near_boundary(new, old, clip_eps, u) & (new != old)):
        return  # a correct candidate may decide such a sample either way
    log_r = new - old
    outside = (log_r != 0) & (np.abs(np.expm1(log_r)) > clip_eps)
    expected = averaged(outside.astype(float), minibatch_end, mode)
    M = 1 if minibatch_end is None else int(np.count_nonzero(minibatch_end))
    tol = 4 * (M + 2) * u * abs(expected) + TINY

    def diagnose(v):
        inclusive = averaged(((log_r == 0) & (clip_eps == 0)) | (np.abs(np.expm1(log_r)) >= clip_eps), minibatch_end, mode)
        if agrees(v, inclusive, tol) and not matches(expected, inclusive, tol):
            return "the comparison is >= (a ratio on the boundary, r = 1 at eps = 0, counted as clipped): it is |r - 1| > eps"
        if minibatch_end is not None:
            for other in ("samples", "minibatches", "last-minibatch"):
                alt = averaged(outside.astype(float), minibatch_end, other)
                if other != mode and agrees(v, alt, tol) and not matches(expected, alt, tol):
                    return f"the minibatches are averaged as {other!r}, not as declared ({mode!r}, diagnostic_average)"
        return ""

    assert_close(value, expected, tol, what=f"{what}: the fraction with |r - 1| > {clip_eps:g}", call=c.code, diagnose=diagnose)


@check("CLIP-FRACTION-STRICT")
def clip_fraction_strict(ctx):
    """2/5 at eps 0.2 for log ratios 0, +-0.1, +-0.5; 0 at the first minibatch even at eps = 0; minibatches averaged as declared."""
    mode = average_mode(ctx)
    a = CLIP_FRACTION.arrays()
    check_clip_fraction(ctx, a["logp_new"], a["logp_old"], a["clip_eps"], what="the known answer")
    f = FIRST_MINIBATCH.arrays()
    check_clip_fraction(ctx, f["logp_new"], f["logp_old"], f["clip_eps"], what="the first minibatch (every r = 1) at eps = 0",
                        decided=True)
    check_clip_fraction(ctx, f["logp_new"], f["logp_old"], 0.2, what="the first minibatch (every r = 1) at eps = 0.2", decided=True)
    new = np.array([-1.0, -0.5, -1.5, -1.0])
    old = np.array([-1.5, -1.0, -1.5, -1.0])  # log ratios 0.5, 0.5, 0, 0
    check_clip_fraction(ctx, new, old, 0.2, what="two clipped samples, two at r = 1")
    wide = np.array([-1.0, 0.25, -2.5, -1.0, -3.0])  # log ratios 0, 1.25 (r = 3.49), -1.5, 0, -2: only r = 3.49 beyond eps = 1
    for clip_eps in edges.values("diagnostic_clip_fraction", "clip_eps"):  # 0: every r != 1 is clipped; 1: only r > 2
        check_clip_fraction(ctx, wide, np.full(5, -1.0), clip_eps, what=f"log ratios 0, 1.25, -1.5, 0, -2 at eps {clip_eps:g}")
    if mode != "per-call":
        check_clip_fraction(ctx, new[::-1], old[::-1], 0.2, AVERAGING_CASE, what="minibatches of 3 and 1", mode=mode)

    def drawn(batch):
        new, old, ends = batch
        for eps in (0.1, 0.2, 0.3):
            check_clip_fraction(ctx, new, old, eps, minibatch_argument(ctx, ends), what="a drawn batch", mode=mode)

    ctx.property(draws.ratio_batches(), drawn, label="drawn", tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# diagnostic_explained_variance

EXPLAINED = contract.known_answer("normalisation.explained-variance")
CONSTANT = contract.known_answer("normalisation.explained-variance-constant-returns")


def run_explained_variance(ctx, values, returns, *, allow_nonfinite=False):
    v, r = rounded(values, ctx.dtype), rounded(returns, ctx.dtype)
    c = call(ctx, "diagnostic_explained_variance", {"values": v, "returns": r}, shape=(), allow_nonfinite=allow_nonfinite)
    return float(c.outputs[0]), c, v, r


def exact_variance(xs) -> Fraction:
    xs = [Fraction(float(x)) for x in xs]
    mean = sum(xs) / len(xs)
    return sum((x - mean) ** 2 for x in xs) / len(xs)


def explained_oracle(values, returns, eps):
    """``(value, a, b)``: 1 - a / (b + eps) exactly, a = Var[R - V], b = Var[R] (population); NaN if b + eps = 0."""
    a = exact_variance([Fraction(float(r)) - Fraction(float(v)) for r, v in zip(returns, values)])
    b = exact_variance(returns) + Fraction(eps)
    return (float(1 - a / b) if b != 0 else math.nan), float(a), float(b)


def explained_tolerance(values, returns, a, b, u) -> float:
    e = returns - values
    B = len(e)
    Ea = (B + 4) * u * a + 2 * u * float(np.mean(np.abs(e - e.mean()) * np.abs(e)))
    Eb = (B + 4) * u * b
    ratio = a / b
    return 2 * ((Ea + abs(ratio) * Eb) / b + u * (abs(ratio) + abs(1 - ratio))) + ORACLE + TINY


def check_explained(ctx, values, returns, *, what: str):
    eps = float(ctx.convention("explained_variance_eps"))
    value, c, v, r = run_explained_variance(ctx, values, returns, allow_nonfinite=True)
    if not math.isfinite(value):
        raise ClauseFailure(f"{what}: the explained variance is {value} though Var[R] > 0", call=c.code,
                            cause="the explained variance is not finite for non-constant returns")
    expected, a, b = explained_oracle(v, r, eps)
    tol = explained_tolerance(v, r, a, b, c.unit_roundoff)

    def diagnose(got):
        swapped, _, _ = explained_oracle(r, v, eps)
        if agrees(got, swapped, tol) and not matches(expected, swapped, tol):
            return "the arguments are swapped: Var[V] is in the denominator (diagnostic_explained_variance(values, returns))"
        B = len(r)
        for scale, label in ((B / (B - 1), "the residual's variance is unbiased and the returns' not"),
                             ((B - 1) / B, "the returns' variance is unbiased and the residual's not")):
            mixed = 1 - a * scale / b
            if agrees(got, mixed, tol) and not matches(expected, mixed, tol):
                return f"the two variances use different divisors: {label}"
        summed = 1 - float(exact_variance([Fraction(float(x)) + Fraction(float(y)) for x, y in zip(r, v)])) / b
        if agrees(got, summed, tol) and not matches(expected, summed, tol):
            return "the residual is R + V, not R - V"
        return ""

    declared = "" if eps == 0 else f" (declared explained_variance_eps {eps:g})"
    assert_close(value, expected, tol, what=f"{what}: 1 - Var[R - V] / Var[R]{declared}", call=c.code, diagnose=diagnose)


@check("EXPLAINED-VARIANCE-VALUES")
def explained_variance_values(ctx):
    """3/5 for the known answer (swapped: 7/9; mixed divisors: 7/15); 1 for a perfect critic and one off by a constant; 0 for a constant one."""
    a = EXPLAINED.arrays()
    check_explained(ctx, a["values"], a["returns"], what="the known answer (3/5)")
    value, c, _, _ = run_explained_variance(ctx, a["values"], a["returns"])
    if float(ctx.convention("explained_variance_eps")) == 0:
        assert_close(value, EXPLAINED.value("explained_variance"), 8 * c.unit_roundoff, what="the known answer vs the published 3/5",
                     call=c.code)
    returns = np.array([3.0, -1.0, 4.0, 1.5, 9.0])
    check_explained(ctx, returns, returns, what="a perfect critic")
    check_explained(ctx, returns + 2.0, returns, what="a critic off by the constant 2")
    check_explained(ctx, np.full(5, float(np.mean(returns))), returns, what="the constant critic mean(R)")
    check_explained(ctx, np.array([0.0, 0.0, 3.0, 2.0, 2.0]), returns, what="a partial critic")
    ctx.property(draws.critic_batches(), lambda pair: check_explained(ctx, *pair, what="a drawn batch"), label="drawn",
                 tier="known-answers-first")


@check("EXPLAINED-VARIANCE-CONSTANT-RETURNS")
def explained_variance_constant_returns(ctx):
    """Constant returns: NaN (Var[R] = 0), or exactly 1 - Var[R - V] / eps with a declared eps."""
    eps = float(ctx.convention("explained_variance_eps"))
    a = CONSTANT.arrays()
    cases = ((a["values"], a["returns"], "the known answer: values [1, 2, 3], returns [2, 2, 2]"),
             (np.array([-4.0, 0.5, 2.0, 7.0]), np.full(4, -3.5), "returns all -3.5"),
             (np.full(3, 2.0), np.full(3, 2.0), "a critic equal to constant returns (0 / 0)"),
             (np.zeros(2), np.zeros(2), "two zero returns and values"))
    for values, returns, what in cases:
        value, c, v, r = run_explained_variance(ctx, values, returns, allow_nonfinite=True)
        if eps == 0:
            if not math.isnan(value):
                raise ClauseFailure(f"{what}: expected NaN (Var[R] = 0: the explained variance is undefined), got {value!r}",
                                    call=c.code, cause="a constant-return batch is reported as a number; declare "
                                    "RLSPEC_CONVENTIONS['explained_variance_eps'] if the candidate divides by Var[R] + eps")
            continue
        expected, ea, eb = explained_oracle(v, r, eps)
        tol = explained_tolerance(v, r, ea, eb, c.unit_roundoff)
        assert_close(value, expected, tol, what=f"{what}: 1 - Var[R - V] / eps (declared explained_variance_eps {eps:g})",
                     call=c.code)


# ---------------------------------------------------------------------------------------------
# diagnostic_entropy

ENTROPY = contract.known_answer("normalisation.entropy")


def entropies(logits) -> tuple[np.ndarray, np.ndarray]:
    """``(H, tol)`` per row in float64 (module docstring), H exact to the oracle's rounding."""
    z = np.asarray(logits, dtype=np.float64)
    top = z.max(axis=1, keepdims=True)
    L = top + np.log(np.sum(np.exp(z - top), axis=1, keepdims=True))
    l = z - L
    p = np.exp(l)
    H = -(p * l).sum(axis=1)
    return H, (L, l, p)


def entropy_tolerance(logits, parts, u) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    L, l, p = parts
    A = z.shape[1]
    M = np.abs(z).max(axis=1, keepdims=True)
    El = u * (2 * M + A + ELEMENTARY * (1 + math.log(A) + np.abs(L)) + np.abs(L) + np.abs(l))
    Ep = p * (El + ELEMENTARY * u)
    terms = np.abs(l) * Ep + p * El + u * p * np.abs(l)
    return 2 * (terms.sum(axis=1) + A * u * (p * np.abs(l)).sum(axis=1)) + 4 * smallest_normal(u) + TINY


def run_entropy(ctx, logits, minibatch_end=None):
    z = rounded(logits, ctx.dtype)
    args = {"logits": z, "minibatch_end": None if minibatch_end is None else np.asarray(minibatch_end, dtype=bool)}
    c = call(ctx, "diagnostic_entropy", args, shape=(), allow_nonfinite=True)
    value = float(c.outputs[0])
    if not math.isfinite(value):
        raise ClauseFailure(f"diagnostic_entropy is {value} on finite logits", call=c.code,
                            cause="0 log 0 is computed as 0 * -inf = NaN: a saturated action (p = 0) must contribute 0; "
                                  "use the log-softmax, or p * log p only where p > 0")
    return value, c, z


def check_entropy(ctx, logits, minibatch_end=None, *, what: str, mode: str = "samples", published=None):
    value, c, z = run_entropy(ctx, logits, minibatch_end)
    H, parts = entropies(z)
    expected = averaged(H, minibatch_end, mode)
    tol = averaging_tolerance(H, entropy_tolerance(z, parts, c.unit_roundoff), minibatch_end, c.unit_roundoff)

    def diagnose(v):
        p = parts[2]
        mixture = p.mean(axis=0)
        of_mean = float(-(mixture[mixture > 0] * np.log(mixture[mixture > 0])).sum())
        if agrees(v, of_mean, tol) and not matches(expected, of_mean, tol):
            return "the entropy of the batch's average distribution is returned, not the mean of the rows' entropies"
        if agrees(v, expected / math.log(2), tol) and not matches(expected, expected / math.log(2), tol):
            return "the entropy is in bits (log2), not nats"
        if minibatch_end is not None:
            for other in ("samples", "minibatches", "last-minibatch"):
                alt = averaged(H, minibatch_end, other)
                if other != mode and agrees(v, alt, tol) and not matches(expected, alt, tol):
                    return f"the minibatches are averaged as {other!r}, not as declared ({mode!r}, diagnostic_average)"
        return ""

    assert_close(value, expected, tol, what=f"{what}: the mean entropy (nats)", call=c.code, diagnose=diagnose)
    if published is not None:
        assert_close(value, published, tol, what=f"{what}: the published entropy", call=c.code, diagnose=diagnose)


@check("ENTROPY-BATCH-MEAN")
def entropy_batch_mean(ctx):
    """Two deterministic rows on different actions: 0 (not log 2, not NaN); a uniform row: log 4; minibatches averaged as declared."""
    mode = average_mode(ctx)
    check_entropy(ctx, ENTROPY.arrays()["logits"], what="two deterministic rows on different actions", published=ENTROPY.value("entropy"))
    check_entropy(ctx, np.zeros((1, 4)), what="a uniform row over 4 actions", published=math.log(4))
    logits = np.array([[0.0, 0.0, -1000.0], [2.0, -1.0, 0.5], [-3.0, 5.0, 5.0], [1.0, 1.0, 1.0]])
    check_entropy(ctx, logits, what="rows of one, two and three live actions")
    if mode != "per-call":
        check_entropy(ctx, logits, AVERAGING_CASE, what="minibatches of 3 and 1", mode=mode)

    def drawn(batch):
        logits, ends = batch
        check_entropy(ctx, logits, minibatch_argument(ctx, ends), what="a drawn batch", mode=mode)

    ctx.property(draws.logit_batches(), drawn, label="drawn", tier="known-answers-first")

"""Proofs for the token-level RLHF chapter.

* The skip rule for masked positions: running the masked recursion over a padded row with interior
  spans (a masked position leaves the carried next value and advantage unchanged) gives, at the real
  tokens, exactly GAE on the compacted row, whatever the masked positions hold.
* The aggregation modes' per-token gradient weights (including Dr. GRPO's length bias).
* token-mean with a global token count is invariant to micro-batch splitting; per-micro-batch
  normalisation is not.
* The per-token clip with asymmetric bounds and the dual clip: derivative table and the zero
  derivative beyond c for A < 0; A > 0 untouched.
"""

from __future__ import annotations

import itertools

import sympy as sp

from .. import contract
from .core import INCONCLUSIVE, ProofResult, combine, identity, proof, restate
from .ppo import Undecided, log_derivative, resolve

gamma, lam = sp.symbols("gamma lambda", real=True)


class _Stop(Exception):
    """Raised by :func:`_record` at the first identity that is not proved (a wrong version fails fast)."""


def _record(steps, result):
    steps.append(result)
    if not result.ok:
        raise _Stop


def _run(body) -> ProofResult:
    steps: list[ProofResult] = []
    try:
        body(steps)
    except _Stop:
        pass
    except Undecided as undecided:
        return ProofResult(INCONCLUSIVE, ["a region could not be resolved"], counterexample=str(undecided))
    return combine(steps)


def _known(operation: str, prefix: str):
    """The contract's known answers of ``operation`` whose id starts with ``prefix``."""
    return [a for a in contract.known_answers(operation).values() if a.id.startswith(prefix)]


def _exact(answer, name):
    """A known answer's (B, L) numbers as SymPy rationals."""
    return [[sp.Rational(v) for v in row] for row in answer.exact(name)]


def _mask(answer):
    return [[int(m) for m in row] for row in answer.inputs["mask"]]


def masked_gae(rewards, values, mask, gamma_, lam_):
    """The skip rule, written as the padded-row recursion with the mask as a 0/1 selector."""
    n = len(rewards)
    out, running, next_value = [0] * n, sp.Integer(0), sp.Integer(0)
    for t in reversed(range(n)):
        m = mask[t]
        delta = rewards[t] + gamma_ * next_value - values[t]
        running = m * (delta + gamma_ * lam_ * running) + (1 - m) * running
        next_value = m * values[t] + (1 - m) * next_value
        out[t] = running
    return out


def compact_gae(rewards, values, gamma_, lam_):
    """GAE on one episode whose last step is terminal: A_k = sum_l (gamma lambda)^l delta_{k+l}."""
    n = len(rewards)
    deltas = [rewards[k] + (gamma_ * values[k + 1] if k + 1 < n else 0) - values[k] for k in range(n)]
    return [sum((gamma_ * lam_) ** l * deltas[k + l] for l in range(n - k)) for k in range(n)]


@proof(
    "rlhf.skipped_span_gae_equals_compacted",
    statement="""On a row whose mask selects real tokens k_1 < ... < k_n (any interior spans, any padding),
    the masked recursion (a masked position leaves the carried next value and advantage unchanged)
    gives at each real token k_j exactly sum_l (gamma lambda)^l delta_{j+l} of the compacted episode
    (its last real token terminal); rewards and values at masked positions do not appear.""",
    assumptions="""Symbolic rewards, values, gamma and lambda; every mask of width 2..5 with at least one
    real token (a masked position holds its own symbols, which must cancel).""",
)
def skipped_span_gae_equals_compacted(recursion=masked_gae) -> ProofResult:
    return _run(lambda steps: _skipped_span(steps, recursion))


def _skipped_span(steps, recursion):
    for width in range(2, 6):
        r = sp.symbols(f"r0:{width}", real=True)
        v = sp.symbols(f"v0:{width}", real=True)
        for mask in itertools.product((0, 1), repeat=width):
            real = [t for t in range(width) if mask[t]]
            if not real:
                continue
            got = recursion(list(r), list(v), list(mask), gamma, lam)
            want = compact_gae([r[t] for t in real], [v[t] for t in real], gamma, lam)
            label = f"mask {''.join(map(str, mask))}"
            for j, t in enumerate(real):
                _record(steps, identity(got[t], want[j], f"{label}: A at position {t}"))


def aggregate(losses, mask, mode, num_tokens=None, norm_length=None):
    """The modes' definitions on a (B, L) table of symbols and a 0/1 mask."""
    B, L = len(mask), len(mask[0])
    sums = [sum(losses[b][t] * mask[b][t] for t in range(L)) for b in range(B)]
    counts = [sum(mask[b]) for b in range(B)]
    if mode == "token-mean":
        return sum(sums) / (sum(counts) if num_tokens is None else num_tokens)
    if mode == "seq-mean-token-mean":
        return sum(s / n for s, n in zip(sums, counts)) / B
    if mode == "seq-mean-token-sum":
        return sum(sums) / B
    return sum(sums) / (B * (L if norm_length is None else norm_length))


def expected_weight(mask, b, mode, num_tokens=None, norm_length=None):
    B, L = len(mask), len(mask[0])
    if mode == "token-mean":
        return sp.Integer(1) / (sum(map(sum, mask)) if num_tokens is None else num_tokens)
    if mode == "seq-mean-token-mean":
        return sp.Integer(1) / (B * sum(mask[b]))
    if mode == "seq-mean-token-sum":
        return sp.Integer(1) / B
    return sp.Integer(1) / (B * (L if norm_length is None else norm_length))


@proof(
    "rlhf.aggregation_gradient_weights",
    statement="""d loss / d l[b, t] is 0 at masked positions and, at real ones, 1/N (token-mean, N the
    token count or num_tokens), 1/(B n_b) (seq-mean-token-mean: a token of a length-n response weighs
    1/(B n), so tokens of responses of different lengths weigh differently: Dr. GRPO's length bias),
    1/B (seq-mean-token-sum), 1/(B norm_length) (seq-mean-token-sum-norm, norm_length default L); in
    the worked example (mask [[1, 0, 0], [1, 1, 1]], losses 1) the losses are 1, 1, 2, 2/3.""",
    assumptions="""Symbolic per-token losses; every mask of shape (2, 3) with a real token in each row,
    and symbolic num_tokens N > 0 and norm_length M > 0.""",
)
def aggregation_gradient_weights(aggregation=aggregate) -> ProofResult:
    return _run(lambda steps: _aggregation_weights(steps, aggregation))


def _aggregation_weights(steps, aggregation):
    N, M = sp.symbols("N M", positive=True)
    B, L = 2, 3
    l = [[sp.Symbol(f"l{b}{t}", real=True) for t in range(L)] for b in range(B)]
    for bits in itertools.product((0, 1), repeat=B * L):
        mask = [list(bits[b * L:(b + 1) * L]) for b in range(B)]
        if not all(any(row) for row in mask):
            continue
        for mode, extra in [("token-mean", {}), ("token-mean", {"num_tokens": N}), ("seq-mean-token-mean", {}),
                            ("seq-mean-token-sum", {}), ("seq-mean-token-sum-norm", {}), ("seq-mean-token-sum-norm", {"norm_length": M})]:
            loss = aggregation(l, mask, mode, **extra)
            for b in range(B):
                for t in range(L):
                    want = expected_weight(mask, b, mode, **extra) if mask[b][t] else 0
                    _record(steps, identity(sp.diff(loss, l[b][t]), want, f"{mode} {extra or ''} mask {bits}: d/d l[{b},{t}]"))
    for answer in _known("aggregate_loss", "rlhf.aggregation-worked-"):  # spec/contract/80_rlhf.toml
        losses, mask, mode = _exact(answer, "per_token_loss"), _mask(answer), answer.inputs["mode"]
        value = sp.Rational(answer.exact("loss"))
        _record(steps, identity(aggregation(losses, mask, mode), value, f"{answer.id}: {mode} = {value}"))


@proof(
    "rlhf.token_mean_microbatch_invariance",
    statement="""For any split of a batch's rows into micro-batches, the sum of the micro-batches'
    token-mean losses with num_tokens = N (the whole batch's real-token count) equals the whole batch's
    token-mean, so accumulated gradients equal the full batch's; normalising each micro-batch by its own
    count n_k instead weights a token by 1/n_k, which equals 1/N only when one micro-batch holds every
    token (G12: counts 1 and 3 with losses 4 and 0 give 4 instead of 1).""",
    assumptions="""Symbolic losses on B = 2..4 rows of width 2 with every mask that has a real token in each
    row, every split into contiguous micro-batches.""",
)
def token_mean_microbatch_invariance(aggregation=aggregate) -> ProofResult:
    return _run(lambda steps: _microbatch(steps, aggregation))


def _microbatch(steps, aggregation):
    for B in range(2, 5):
        l = [[sp.Symbol(f"l{b}{t}", real=True) for t in range(2)] for b in range(B)]
        for bits in itertools.product(((1, 0), (1, 1), (0, 1)), repeat=B):
            mask = [list(row) for row in bits]
            N = sum(map(sum, mask))
            full = aggregation(l, mask, "token-mean")
            for cuts in itertools.chain.from_iterable(itertools.combinations(range(1, B), k) for k in range(1, B)):
                edges = (0,) + cuts + (B,)
                parts = sum(aggregation(l[a:b], mask[a:b], "token-mean", num_tokens=N) for a, b in zip(edges, edges[1:]))
                _record(steps, identity(parts, full, f"B = {B}, mask {bits}, cuts {cuts}"))
    # G12: per-micro-batch counts
    four = aggregation([[sp.Integer(4), 0, 0]], [[1, 0, 0]], "token-mean") + aggregation([[0, 0, 0]], [[1, 1, 1]], "token-mean")
    _record(steps, identity(four, 4, "G12: own counts give 4 + 0 = 4"))
    g12 = contract.known_answer("rlhf.aggregation-g12")
    _record(steps, identity(aggregation(_exact(g12, "per_token_loss"), _mask(g12), "token-mean", num_tokens=sp.Integer(g12.inputs["num_tokens"])),
                            sp.Rational(g12.exact("loss")), "G12: full batch gives 1"))


r, A, lo, hi, c = sp.symbols("r A clip_low clip_high c", real=True)
e, f, a, s, w, t = sp.symbols("e f a s w t", positive=True)


def token_objective(r_, A_, low_, high_, c_=None):
    """min(r A, clip(r, 1 - clip_low, 1 + clip_high) A), floored at c A for A < 0 when c is given."""
    objective = sp.Min(r_ * A_, sp.Max(1 - low_, sp.Min(r_, 1 + high_)) * A_)
    if c_ is not None:
        objective = sp.Max(objective, c_ * sp.Min(A_, 0))
    return objective


LOW, HIGH = 1 / (1 + e), 1 / (1 + f)  # 0 < clip_low, clip_high < 1, independent


REGION_MEANING = {  # each region's working parameter as a function of r, and the region as a condition
    "r < 1 - clip_low": ({s: (1 - lo) / r - 1}, lambda: r < 1 - lo),
    "1 - clip_low < r < 1 + clip_high": ({w: (r - 1 + lo) / (1 + hi - r)}, lambda: sp.And(1 - lo < r, r < 1 + hi)),
    "r > 1 + clip_high": ({s: r - 1 - hi}, lambda: r > 1 + hi),
    "1 + clip_high < r < c": ({w: (r - 1 - hi) / (c - r)}, lambda: sp.And(1 + hi < r, r < c)),
    "r > c": ({s: r - c}, lambda: r > c),
}


def region_notation(sign_label: str, label: str):
    """``(notation, where)``: e, f, a, t in clip_low, clip_high, A, c, the region's parameter in r (the book prints
    the relations in the clause's symbols)."""
    meaning, condition = REGION_MEANING[label]
    notation = {e: (1 - lo) / lo, f: (1 - hi) / hi, a: A if sign_label == "A > 0" else -A, t: c - 1 - hi, **meaning}
    return notation, sp.And(A > 0 if sign_label == "A > 0" else A < 0, condition())


def _regions(with_c):
    regions = {
        "r < 1 - clip_low": (1 - LOW) / (1 + s),
        "1 - clip_low < r < 1 + clip_high": (1 - LOW) + (LOW + HIGH) * w / (1 + w),
        "r > 1 + clip_high": 1 + HIGH + s,
    }
    if with_c:
        C = 1 + HIGH + t
        del regions["r > 1 + clip_high"]
        regions["1 + clip_high < r < c"] = 1 + HIGH + t * w / (1 + w)
        regions["r > c"] = C + s
        return regions, C
    return regions, None


@proof(
    "rlhf.token_clip_gradient",
    statement="""With independent bounds 1 - clip_low and 1 + clip_high, d min(r A, clip(r) A) / d log r is
    r A except where r has passed the bound in the advantage's direction (A > 0, r > 1 + clip_high; A < 0,
    r < 1 - clip_low), where it is 0; the per-token loss is a sum, so each token's gradient is its own.""",
    assumptions="clip_low = 1/(1+e), clip_high = 1/(1+f) with e, f > 0; open regions of r for each sign of A.",
)
def token_clip_gradient(objective=token_objective) -> ProofResult:
    return _run(lambda steps: _clip_gradient(steps, objective))


def _clip_gradient(steps, objective):
    regions, _ = _regions(False)
    for sign_label, A_value in {"A > 0": a, "A < 0": -a}.items():
        for label, r_value in regions.items():
            point = {r: r_value, A: A_value, lo: LOW, hi: HIGH}
            branch = resolve(objective(r, A, lo, hi), point)
            live = (sign_label == "A > 0" and label != "r > 1 + clip_high") or (sign_label == "A < 0" and label != "r < 1 - clip_low")
            want = (r * A).xreplace(point) if live else 0
            notation, where = region_notation(sign_label, label)
            _record(steps, restate(identity(log_derivative(branch).xreplace(point), want, f"{sign_label}, {label}"),
                                   shown=(r * sp.Derivative(objective(r, A, lo, hi), r), r * A if live else sp.Integer(0)),
                                   where=where, notation=notation))


@proof(
    "rlhf.token_dual_clip",
    statement="""With c > 1 + clip_high the dual-clipped per-token objective equals the plain one for A > 0
    everywhere and for A < 0 with r < c; for A < 0, r > c it is the constant c A, whose derivative is 0:
    the loss is capped at -c A.""",
    assumptions="c = 1 + clip_high + t, t > 0; clip bounds as in rlhf.token_clip_gradient.",
)
def token_dual_clip(objective=token_objective) -> ProofResult:
    return _run(lambda steps: _dual_clip(steps, objective))


def _dual_clip(steps, objective):
    for sign_label, A_value in {"A > 0": a, "A < 0": -a}.items():
        regions, C = _regions(True)
        if sign_label == "A > 0":
            regions["r > c"] = C + s
            regions["1 + clip_high < r < c"] = 1 + HIGH + t * w / (1 + w)
        for label, r_value in regions.items():
            point = {r: r_value, A: A_value, lo: LOW, hi: HIGH, c: C}
            dual = resolve(objective(r, A, lo, hi, c), point).xreplace(point)
            plain = resolve(objective(r, A, lo, hi), point).xreplace(point)
            notation, where = region_notation(sign_label, label)
            stated = objective(r, A, lo, hi, c)
            if sign_label == "A < 0" and label == "r > c":
                _record(steps, restate(identity(dual, C * A_value, f"{sign_label}, {label}: objective = c A"),
                                       shown=(stated, c * A), where=where, notation=notation))
                branch = resolve(objective(r, A, lo, hi, c), point)
                _record(steps, restate(identity(log_derivative(branch).xreplace(point), 0, f"{sign_label}, {label}: derivative 0"),
                                       shown=(r * sp.Derivative(stated, r), sp.Integer(0)), where=where, notation=notation))
            else:
                _record(steps, restate(identity(dual, plain, f"{sign_label}, {label}: unchanged"),
                                       shown=(stated, objective(r, A, lo, hi)), where=where, notation=notation))

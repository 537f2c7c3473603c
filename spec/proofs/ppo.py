"""Proofs for the PPO chapter (Schulman et al. 2017, arXiv:1707.06347 §3).

The clipped objective ``min(r A, clip(r, 1 - eps, 1 + eps) A)`` is piecewise: which branch the min
and the clip pick depends on where r lies and on the sign of A. The proofs split the (r, A) plane
into its regions, each written with positive symbols so that every comparison inside a region has
a definite sign:

    eps = 1/(1+e)                      (0 < eps < 1)
    A   = +a or -a                     (a > 0)
    r   = (1-eps)/(1+s)                below the clip range        (s > 0)
          1-eps, 1+eps                 the two boundaries
          1-eps + 2 eps w/(1+w)        inside                      (w > 0)
          1+eps+s                      above

In a region, each Min/Max is resolved by the sign of the difference of its arguments, decided by
positivity of coefficients: a polynomial in positive symbols whose coefficients are all positive
is positive. An undecided comparison makes the proof inconclusive (it fails closed).
"""

from __future__ import annotations

import random

import sympy as sp

from .. import contract
from .core import INCONCLUSIVE, PROVED, REFUTED, Identity, ProofResult, combine, identity, proof, restate, field_sign

r, A, eps, c = sp.symbols("r A epsilon c", real=True)
e, a, s, w, t = sp.symbols("e a s w t", positive=True)
x, theta = sp.symbols("x theta", real=True)

EPS = 1 / (1 + e)
REGIONS = {
    "r < 1 - eps": (1 - EPS) / (1 + s),
    "r = 1 - eps": 1 - EPS,
    "1 - eps < r < 1 + eps": (1 - EPS) + 2 * EPS * w / (1 + w),
    "r = 1 + eps": 1 + EPS,
    "r > 1 + eps": 1 + EPS + s,
}
SIGNS = {"A > 0": a, "A < 0": -a}

# What each working symbol means in the clause's symbols (r, A, epsilon, c), region by region: the book prints the
# relations in r, A and epsilon, with the region as the condition (spec.proofs.core.Identity.notation).
REGION_MEANING = {
    "r < 1 - eps": ({s: (1 - eps) / r - 1}, lambda: r < 1 - eps),
    "r = 1 - eps": ({}, lambda: sp.Eq(r, 1 - eps)),
    "1 - eps < r < 1 + eps": ({w: (r - 1 + eps) / (1 + eps - r)}, lambda: sp.And(1 - eps < r, r < 1 + eps)),
    "r = 1 + eps": ({}, lambda: sp.Eq(r, 1 + eps)),
    "r > 1 + eps": ({s: r - 1 - eps}, lambda: r > 1 + eps),
    "1 + eps < r < c": ({w: (r - 1 - eps) / (c - r)}, lambda: sp.And(1 + eps < r, r < c)),
    "r = c": ({}, lambda: sp.Eq(r, c)),
    "r > c": ({s: r - c}, lambda: r > c),
}


def region_notation(label: str) -> tuple[dict, object]:
    """``(notation, where)`` of a region label such as ``"A > 0, r < 1 - eps"``: e = 1/eps - 1, a = |A|, and the
    region's own parameter (s or w) as a function of r; ``where`` the region as a SymPy condition."""
    sign, region = label.split(", ", 1)
    meaning, condition = REGION_MEANING[region]
    notation = {e: (1 - eps) / eps, a: A if sign == "A > 0" else -A, t: c - 1 - eps, **meaning}
    return notation, sp.And(A > 0 if sign == "A > 0" else A < 0, condition())


def clip_objective(r_, A_, eps_):
    """Schulman et al. 2017, eq. 7: ``min(r A, clip(r, 1 - eps, 1 + eps) A)`` (maximised; the loss is its negative mean)."""
    return sp.Min(r_ * A_, sp.Max(1 - eps_, sp.Min(r_, 1 + eps_)) * A_)


class Undecided(Exception):
    """A comparison inside a region whose sign positivity of coefficients cannot settle."""


def _poly_sign(p):
    p = sp.expand(p)
    if p == 0:
        return 0
    if p.is_number:
        return 1 if p > 0 else -1
    coefficients = sp.Poly(p, *sorted(p.free_symbols, key=lambda q: q.name)).coeffs()
    if all(c > 0 for c in coefficients):
        return 1
    if all(c < 0 for c in coefficients):
        return -1
    return None


def sign(expr):
    """+1, 0 or -1 for a rational function of positive symbols, or None if not decided."""
    decided = field_sign(expr)
    if decided is not None:
        return decided
    numerator, denominator = sp.fraction(sp.together(sp.sympify(expr)))
    signs = (_poly_sign(numerator), _poly_sign(denominator))
    if None in signs:
        return None
    return signs[0] * signs[1]


def resolve(expr, point):
    """``expr`` with every Min/Max replaced by the argument it picks at ``point`` (a substitution
    into positive region symbols); the result keeps the original symbols (r, A, eps)."""
    if isinstance(expr, (sp.Min, sp.Max)):
        options = [resolve(arg, point) for arg in expr.args]
        best = options[0]
        for other in options[1:]:
            difference = sign(other.xreplace(point) - best.xreplace(point))
            if difference is None:
                raise Undecided(f"cannot order {other} and {best} at {point}")
            if (difference < 0) if isinstance(expr, sp.Min) else (difference > 0):
                best = other
        return best
    if expr.args:
        return expr.func(*[resolve(arg, point) for arg in expr.args])
    return expr


def _witness(expr):
    """A rational point of the region symbols and the value of ``expr`` there."""
    rng = random.Random(0)
    point = {q: sp.Rational(rng.randint(1, 9), rng.randint(1, 9)) for q in sorted(expr.free_symbols, key=lambda q: q.name)}
    return ", ".join(f"{q} = {v}" for q, v in point.items()), sp.nsimplify(expr.xreplace(point))


def nonnegative(expr, label) -> ProofResult:
    """Decide ``expr >= 0`` over positive symbols: proved, refuted (with a rational witness) or inconclusive."""
    decided = sign(expr)
    relation = [Identity(label, sp.sympify(expr), sp.Integer(0), ">=")]
    if decided in (0, 1):
        return ProofResult(PROVED, [f"{label}: proved"], identities=relation)
    if decided == -1:
        shown, value = _witness(expr)
        return ProofResult(REFUTED, [f"{label}: refuted"], counterexample=f"{label}: at {shown} the gap = {value}",
                           identities=relation)
    return ProofResult(INCONCLUSIVE, [f"{label}: inconclusive"], counterexample=f"{label}: sign of {expr} undecided",
                       identities=relation)


def _regions(objective):
    """(label, r in the region, A, the objective resolved to one branch in r, A, eps) for every region."""
    base = objective(r, A, eps)
    for sign_label, A_value in SIGNS.items():
        for region_label, r_value in REGIONS.items():
            point = {r: r_value, A: A_value, eps: EPS}
            yield f"{sign_label}, {region_label}", r_value, A_value, resolve(base, point)


def _guarded(body) -> ProofResult:
    try:
        return body()
    except Undecided as undecided:
        return ProofResult(INCONCLUSIVE, ["a region could not be resolved"], counterexample=str(undecided))


@proof(
    "ppo.clip_pessimistic_bound",
    statement="""L_clip <= L_IS pointwise: min(r A, clip(r, 1 - eps, 1 + eps) A) <= r A for every ratio
    r > 0 and advantage A, with equality inside the clip range and wherever the ratio moved against
    the advantage.""",
    assumptions="""0 < eps < 1, r > 0, A != 0 (A = 0 is trivial); the five regions of r (below, at,
    inside, at, above the clip range) for each sign of A.""",
)
def clip_pessimistic_bound(objective=clip_objective) -> ProofResult:
    def body():
        steps = []
        for label, r_value, A_value, branch in _regions(objective):
            gap = (r * A - branch).xreplace({r: r_value, A: A_value, eps: EPS})
            notation, where = region_notation(label)
            steps.append(restate(nonnegative(gap, f"{label}: r A - L_clip >= 0"), shown=(r * A - objective(r, A, eps), sp.Integer(0)),
                                 where=where, notation=notation))
        return combine(steps)

    return _guarded(body)


# The clip objective's gradient table (Schulman et al. 2017 §3, Figure 1): the derivative of the objective with respect to log pi (= log r) is r A
# where the gradient is live and 0 where the clip has stopped it.
LIVE = {
    ("A > 0", "r < 1 - eps"): True,
    ("A > 0", "1 - eps < r < 1 + eps"): True,
    ("A > 0", "r > 1 + eps"): False,
    ("A < 0", "r > 1 + eps"): True,
    ("A < 0", "1 - eps < r < 1 + eps"): True,
    ("A < 0", "r < 1 - eps"): False,
}


def table_values():
    """The clip gradient table's rows, from the known answer ppo.clip-gradient-table (spec/contract/30_ppo.toml): ``(eps, rows)``
    with rows ``(A, r, d loss / d log pi_new)`` (loss = -objective), each row alone, as exact rationals (the
    written numbers are decimals: sp.Rational of their text)."""
    answer = contract.known_answer("ppo.clip-gradient-table")
    q = lambda x: sp.Rational(repr(x))
    gradients = answer.derived["d loss / d logp_new, each row alone"]
    rows = [(q(A), q(r), q(g)) for A, r, g in zip(answer.inputs["advantages"], answer.derived["ratio"], gradients)]
    return q(answer.inputs["clip_eps"]), rows


def log_derivative(branch):
    """d branch / d log r = r d branch / d r (chain rule through r = exp(log r))."""
    return sp.expand(r * sp.diff(branch, r))


@proof(
    "ppo.clip_gradient_table",
    statement="""The derivative of the clipped objective with respect to log pi(a|s) is r A (push the
    probability in the advantage's direction) except where r has passed the clip boundary in the
    direction the advantage wants (A > 0, r > 1 + eps; A < 0, r < 1 - eps), where it is 0: the six
    rows of the clip objective's gradient table. At eps = 0.2, A = 2: r = 0.5, 1, 1.5 give d loss / d log pi = -1, -2, 0;
    at A = -2 they give 0, 2, 3.""",
    assumptions="""0 < eps < 1, r > 0, open regions (the kinks at r = 1 +- eps have one-sided
    derivatives); exact rationals for the six values.""",
)
def clip_gradient_table(objective=clip_objective) -> ProofResult:
    def body():
        steps = []
        for label, r_value, A_value, branch in _regions(objective):
            key = tuple(label.split(", ", 1))
            if key not in LIVE:
                continue  # the boundaries: a kink, not a row of the table
            expected = r * A if LIVE[key] else sp.Integer(0)
            derivative = log_derivative(branch).xreplace({r: r_value, A: A_value, eps: EPS})
            notation, where = region_notation(label)
            steps.append(restate(identity(derivative, expected.xreplace({r: r_value, A: A_value}), f"{label}: d L_clip / d log pi"),
                                 shown=(r * sp.Derivative(objective(r, A, eps), r), expected), where=where, notation=notation))
        base = objective(r, A, eps)
        eps_value, rows = table_values()
        for A_value, r_value, gradient in rows:
            point = {r: r_value, A: A_value, eps: eps_value}
            branch = resolve(base, point)
            value = -log_derivative(branch).xreplace(point)
            steps.append(identity(value, gradient, f"eps = {eps_value}, A = {A_value}, r = {r_value}: d loss / d log pi = {gradient}"))
        return combine(steps)

    return _guarded(body)


def log_space_ratio(logp_new, logp_old):
    """``r = exp(log pi - log pi_old)``."""
    return sp.exp(logp_new - logp_old)


@proof(
    "ppo.vanilla_gradient_at_ratio_one",
    statement="""At the first step (log pi_theta = log pi_old for every sample, so r = 1) the clipped
    loss -mean_i L_clip,i equals -mean_i A_i and its gradient is -(1/B) sum_i A_i grad log pi_theta(a_i|s_i),
    the vanilla policy-gradient estimator: r = 1 lies strictly inside the clip range, where the
    clip is the identity.""",
    assumptions="""0 < eps < 1; log pi_theta(a_i|s_i) = f_i(theta), differentiable; advantages of any
    sign; batches B = 1..4.""",
)
def vanilla_gradient_at_ratio_one(ratio=log_space_ratio) -> ProofResult:
    def body():
        steps = []
        # r = 1 is inside the clip range, and there both branches of the min are r A (whatever A's sign).
        inside = {r: sp.Integer(1), eps: EPS}
        branch = resolve(clip_objective(r, A, eps), inside)
        steps.append(identity(branch, r * A, "at r = 1 the objective's branch is r A"))
        for B in range(1, 5):
            f = [sp.Function(f"f{i}")(theta) for i in range(B)]
            old = sp.symbols(f"l0:{B}", real=True)
            adv = sp.symbols(f"A0:{B}", real=True)
            loss = -sum(branch.xreplace({r: ratio(f[i], old[i]), A: adv[i]}) for i in range(B)) / B
            at_old = {f[i]: old[i] for i in range(B)}
            # differentiate, name each f_i'(theta) g_i, then set f_i(theta) = l_i (log pi = log pi_old)
            g = sp.symbols(f"g0:{B}", real=True)
            gradient = sp.diff(loss, theta).subs({sp.Derivative(f[i], theta): g[i] for i in range(B)}).subs(at_old)
            vanilla = -sum(adv[i] * g[i] for i in range(B)) / B
            steps.append(identity(gradient, vanilla, f"B = {B}: grad loss = -(1/B) sum A_i grad log pi_i"))
            steps.append(identity(loss.subs(at_old), -sum(adv) / B, f"B = {B}: loss = -mean(A)"))
        return combine(steps)

    return _guarded(body)


def dual_clip_objective(r_, A_, eps_, c_):
    """Dual clip (Ye et al. 2020; Tianshou, verl): for A < 0 the objective is floored at c A, c > 1.

    ``max(L_clip, c min(A, 0))``: for A >= 0 the floor is 0 <= L_clip, so only A < 0 is affected.
    """
    return sp.Max(clip_objective(r_, A_, eps_), c_ * sp.Min(A_, 0))


@proof(
    "ppo.dual_clip_floor",
    statement="""With a dual-clip constant c > 1 + eps the objective is unchanged for A > 0 and for
    A < 0 with r <= c, and for A < 0, r > c it is the constant c A (its derivative is 0): the loss
    is bounded by -c A however large the ratio grows.""",
    assumptions="c = 1 + eps + t with t > 0; the regions of the clip proofs, with r > 1 + eps split at c for A < 0.",
)
def dual_clip_floor(objective=dual_clip_objective) -> ProofResult:
    def body():
        c_value = 1 + EPS + t
        dual, plain = objective(r, A, eps, c), clip_objective(r, A, eps)
        steps = []
        for sign_label, A_value in SIGNS.items():
            regions = dict(REGIONS)
            if sign_label == "A < 0":
                del regions["r > 1 + eps"]
                regions["1 + eps < r < c"] = 1 + EPS + t * w / (1 + w)
                regions["r = c"] = c_value
                regions["r > c"] = c_value + s
            for region_label, r_value in regions.items():
                point = {r: r_value, A: A_value, eps: EPS, c: c_value}
                branch = resolve(dual, point)
                label = f"{sign_label}, {region_label}"
                notation, where = region_notation(label)
                if region_label == "r > c":
                    expected, stated = c_value * A_value, c * A
                    derivative = log_derivative(branch).xreplace(point)
                    steps.append(restate(identity(derivative, 0, f"{label}: d objective / d log pi = 0"),
                                         shown=(r * sp.Derivative(dual, r), sp.Integer(0)), where=where, notation=notation))
                else:
                    stated = resolve(plain, point)
                    expected = stated.xreplace(point)
                steps.append(restate(identity(branch.xreplace(point), expected, f"{label}: objective"),
                                     shown=(dual, stated), where=where, notation=notation))
        return combine(steps)

    return _guarded(body)


def standardise(values, ddof):
    """``(x - mean) / std_ddof`` (the stabilising eps is a rounding guard, left out of the identity)."""
    n = len(values)
    mean = sum(values) / n
    std = sp.sqrt(sum((v - mean) ** 2 for v in values) / (n - ddof))
    return [(v - mean) / std for v in values]


@proof(
    "ppo.advantage_normalisation_moments",
    statement="""Normalised advantages (A - mean A) / std_ddof(A) have mean 0 and, measured with the
    same ddof, standard deviation 1, for ddof = 0 (population) and ddof = 1 (sample) alike.""",
    assumptions="Symbolic advantages, not all equal (std > 0); n = 2..4 for each ddof in {0, 1}.",
)
def advantage_normalisation_moments(normalise=standardise) -> ProofResult:
    steps = []
    for n in range(2, 5):
        values = sp.symbols(f"A0:{n}", real=True)
        for ddof in (0, 1):
            z = normalise(list(values), ddof)
            steps.append(identity(sp.together(sum(z)), 0, f"n = {n}, ddof = {ddof}: mean 0"))
            square_sum = sp.cancel(sp.together(sum(zi**2 for zi in z)))
            steps.append(identity(square_sum / (n - ddof), 1, f"n = {n}, ddof = {ddof}: std 1"))
    return combine(steps)

"""Proofs for the policy-gradient chapter (Williams 1992; Sutton & Barto 2018 §13.3-13.4).

Softmax policies are written with logits ``z`` and ``e_i = exp(z_i)`` (positive symbols), so every
identity is rational in ``e`` and SymPy decides it on the numerator over a common denominator. Gaussian expectations are taken
over the standard normal ``xi`` with the action ``a = mu + sigma xi``; its moments come from
``sympy.integrate``, not from a table.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .core import INCONCLUSIVE, PROVED, REFUTED, Identity, ProofResult, combine, identity, proof, rational_zero

# The softmax's working symbols in the clause's notation: e_i = exp(z_i) (logits z), and, for the second step of
# pg.past_rewards_zero_gradient, f{s}_{a} = exp of the logit of action a at the second state s.
SOFTMAX_NOTATION = {f"e{i}": sp.exp(sp.Symbol(f"z{i}")) for i in range(8)}
SOFTMAX_NOTATION.update({f"f{s}_{i}": sp.exp(sp.Symbol(f"zeta_{s}{i}")) for s in range(8) for i in range(8)})

MIN_ACTIONS, MAX_ACTIONS = 2, 6


def rational_identity(lhs, rhs, label: str) -> ProofResult:
    """``identity`` for rational functions (the denominators non-zero where the proof applies it): decided in
    polynomial field arithmetic (``core.rational_zero``) or, failing that, by the numerator of ``lhs - rhs`` over a
    common denominator; both far faster than ``simplify``."""
    if rational_zero(sp.sympify(lhs) - sp.sympify(rhs)):
        return ProofResult(PROVED, [f"{label} (numerator of lhs - rhs): proved"],
                           identities=[Identity(label, sp.sympify(lhs), sp.sympify(rhs))])
    numerator, _ = sp.together(sp.sympify(lhs) - sp.sympify(rhs)).as_numer_denom()
    result = identity(sp.expand(numerator), 0, f"{label} (numerator of lhs - rhs)")
    result.identities = [Identity(label, sp.sympify(lhs), sp.sympify(rhs))]  # what was decided, as stated
    return result


def all_of(results, label: str) -> ProofResult:
    """``combine`` many small identities, recorded as one step; stops at the first one not proved."""
    done = []
    for result in results:  # a generator: nothing after a failure is evaluated
        done.append(result)
        if not result.ok:
            break
    merged = combine(done)
    return ProofResult(merged.status, [f"{label}: {merged.status}"], merged.counterexample, merged.identities)


def nonzero(expr, label: str) -> ProofResult:
    """Establish ``expr != 0`` for a closed-form real number (30-digit evaluation, far from 0)."""
    decided = [Identity(label, sp.sympify(expr), sp.Integer(0), "!=")]
    # evalf bounds its own error (it raises the working precision until 30 digits are right), so a value this far
    # from 0 is not 0; simplify, the dear part, is left for a value near 0, where it decides "exactly 0".
    value = sp.N(expr, 30)
    if value.is_number and value.is_real and abs(value) > sp.Float("1e-20", 30):
        return ProofResult(PROVED, [f"{label}: = {sp.N(expr, 6)} != 0"], identities=decided)
    if sp.simplify(expr) == 0:
        return ProofResult(REFUTED, [f"{label}: refuted"], counterexample=f"{label}: the quantity is exactly 0",
                           identities=decided)
    return ProofResult(INCONCLUSIVE, [f"{label}: inconclusive"], counterexample=f"{label}: {expr}", identities=decided)


# ---------------------------------------------------------------------------------------------
# softmax policies


def softmax(n: int):
    """Logits ``z``, ``e = exp(z)``, log-softmax as a function of ``z``, and ``pi`` in terms of ``e``."""
    z = sp.symbols(f"z0:{n}")
    e = sp.symbols(f"e0:{n}", positive=True)
    log_pi = [zi - sp.log(sum(sp.exp(zj) for zj in z)) for zi in z]  # log pi_a = z_a - log sum_j exp z_j
    pi = [ei / sum(e) for ei in e]
    return z, e, log_pi, pi


@lru_cache(maxsize=None)
def derived_score(n: int):
    """``d log pi_a / d z_b`` by differentiating log-softmax, in terms of ``e``: an n x n matrix."""
    z, e, log_pi, _ = softmax(n)
    back = {sp.exp(zi): ei for zi, ei in zip(z, e)}
    return tuple(tuple(sp.diff(log_pi[a], z[b]).subs(back) for b in range(n)) for a in range(n))


def softmax_score(a: int, b: int, pi):
    """The softmax score ``d log pi_a / d z_b = [a = b] - pi_b`` (the softmax's Jacobian)."""
    return (1 if a == b else 0) - pi[b]


@proof(
    "pg.score_zero_mean",
    notation=SOFTMAX_NOTATION,
    statement="""For a softmax policy with n logits z, grad_z log pi(a) = e_a - pi, and the score has zero
    expectation: sum_a pi(a) grad_z log pi(a) = pi - (sum_a pi(a)) pi = 0.""",
    assumptions="""Finite action set, pi = softmax(z), so sum_a pi(a) = 1. For every n symbolically (a
    Kronecker-delta sum); the derivative of log-softmax explicitly for n = 2..6.""",
)
def score_zero_mean(score=softmax_score) -> ProofResult:
    a, b = sp.symbols("a b", integer=True, positive=True)
    n = sp.Symbol("n", integer=True, positive=True)
    p = sp.IndexedBase("pi")
    total = sp.Sum(p[a] * (sp.KroneckerDelta(a, b) - p[b]), (a, 1, n)).doit()
    inside = total.args[0][0] if isinstance(total, sp.Piecewise) else total  # the branch 1 <= b <= n
    inside = sp.factor_terms(inside.replace(lambda x: isinstance(x, sp.Sum), sp.factor_terms))
    steps = [identity(inside.subs(sp.Sum(p[a], (a, 1, n)), 1), 0, "every n: sum_a pi_a ([a = b] - pi_b) = 0")]
    for k in range(MIN_ACTIONS, MAX_ACTIONS + 1):
        _, _, _, pi = softmax(k)
        grad = derived_score(k)
        steps.append(all_of((rational_identity(grad[i][j], score(i, j, pi), f"d log pi_{i} / d z_{j}")
                             for i in range(k) for j in range(k)), f"n = {k}: the score formula is the derivative"))
        steps.append(all_of((rational_identity(sum(pi[i] * score(i, j, pi) for i in range(k)), 0, f"component {j}")
                             for j in range(k)), f"n = {k}: sum_a pi_a score_a = 0"))
        if not steps[-1].ok or not steps[-2].ok:
            break
    return combine(steps)


def state_baseline(a: int, Q, b):
    """A baseline that depends on the state only: the same ``b`` for every action."""
    return b


@proof(
    "pg.baseline_unbiased",
    notation=SOFTMAX_NOTATION,
    statement="""Subtracting a state-dependent baseline b(s) leaves the expected gradient unchanged:
    sum_a pi(a) grad log pi(a) (Q(a) - b) = sum_a pi(a) grad log pi(a) Q(a), for softmax policies.""",
    assumptions="""b does not depend on the action; Q(a) and b arbitrary reals. Softmax with n = 2..6
    actions, the score taken from the derivative of log-softmax.""",
)
def baseline_unbiased(baseline=state_baseline) -> ProofResult:
    steps = []
    b = sp.Symbol("b", real=True)
    for k in range(MIN_ACTIONS, MAX_ACTIONS + 1):
        _, _, _, pi = softmax(k)
        grad = derived_score(k)
        Q = sp.symbols(f"Q0:{k}", real=True)
        with_b = [sum(pi[i] * grad[i][j] * (Q[i] - baseline(i, Q, b)) for i in range(k)) for j in range(k)]
        without = [sum(pi[i] * grad[i][j] * Q[i] for i in range(k)) for j in range(k)]
        steps.append(all_of((rational_identity(x, y, f"component {j}") for j, (x, y) in enumerate(zip(with_b, without))),
                            f"n = {k}: E[score (Q - b)] = E[score Q]"))
        if not steps[-1].ok:
            break
    return combine(steps)


@proof(
    "pg.action_dependent_baseline_biased",
    statement="""A baseline that depends on the action is not a baseline: with two actions, logits (0, 0),
    Q = (1, 0) and b(a) = Q(a), the expected gradient is sum_a pi(a) grad log pi(a) (Q(a) - b(a)) = (0, 0)
    while the true policy gradient is (1/4, -1/4).""",
    assumptions="Softmax with two actions; the score from the derivative of log-softmax; exact rationals.",
)
def action_dependent_baseline_biased() -> ProofResult:
    z, e, _, pi = softmax(2)
    grad = derived_score(2)
    at = {e[0]: 1, e[1]: 1}  # logits (0, 0)
    Q = [sp.Integer(1), sp.Integer(0)]
    true = [sp.cancel(sum(pi[i] * grad[i][j] * Q[i] for i in range(2))).subs(at) for j in range(2)]
    biased = [sp.cancel(sum(pi[i] * grad[i][j] * (Q[i] - Q[i]) for i in range(2))).subs(at) for j in range(2)]
    quarter = sp.Rational(1, 4)
    return combine([
        identity(true[0], quarter, "true gradient, component 0 = 1/4"),
        identity(true[1], -quarter, "true gradient, component 1 = -1/4"),
        identity(biased[0], 0, "with b(a) = Q(a), component 0 = 0"),
        identity(biased[1], 0, "with b(a) = Q(a), component 1 = 0"),
        nonzero(true[0] - biased[0], "bias in component 0"),
    ])


def reward_before(a0: int, a1: int, r0):
    """The reward collected at step 0: a function of the first action only."""
    return r0[a0]


@proof(
    "pg.past_rewards_zero_gradient",
    notation=SOFTMAX_NOTATION,
    statement="""Rewards collected before step t contribute zero expected gradient at step t:
    E[grad log pi(a_1|s_1) r_0] = 0 when r_0 depends on (s_0, a_0) only, because conditioned on the
    history r_0 is a constant and the score at step 1 has zero mean (reward-to-go, Sutton & Barto 2018 §13.3).""",
    assumptions="""Two steps; s_1 = a_0 (each first action leads to its own state); softmax policies with
    their own logits in every state; n = 2, 3 actions; r_0 arbitrary reals.""",
)
def past_rewards_zero_gradient(weight=reward_before) -> ProofResult:
    def each():
        for k in (2, 3):
            yield from per_size(k)

    def per_size(k):
        _, _, _, pi0 = softmax(k)
        grad = derived_score(k)
        states = []
        for s in range(k):  # the step-1 policy in state s_1 = a_0 = s, on its own logits
            e_s = sp.symbols(f"f{s}_0:{k}", positive=True)
            subs = dict(zip(sp.symbols(f"e0:{k}", positive=True), e_s))
            states.append(([p.subs(subs) for p in pi0], [[g.subs(subs) for g in row] for row in grad]))
        r0 = sp.symbols(f"r0:{k}", real=True)
        for s in range(k):  # the gradient with respect to the logits of state s
            for j in range(k):
                pi1, grad1 = states[s]
                total = sum(pi0[a0] * (pi1[a1] * grad1[a1][j] * weight(a0, a1, r0) if a0 == s else 0)
                            for a0 in range(k) for a1 in range(k))
                yield rational_identity(total, 0, f"n = {k}: d / d z1[{s}]_{j}")

    return all_of(each(), "E[grad log pi(a_1|s_1) r_0] = 0 for n = 2, 3")


# ---------------------------------------------------------------------------------------------
# Gaussian policies

xi = sp.Symbol("xi", real=True)


@lru_cache(maxsize=None)
def standard_normal_moments() -> tuple:
    """``E[xi^k]`` for xi ~ N(0, 1), k = 0..5, by integrating against the density."""
    density = sp.exp(-(xi**2) / 2) / sp.sqrt(2 * sp.pi)
    return tuple(sp.integrate(xi**k * density, (xi, -sp.oo, sp.oo)) for k in range(6))


def expectation(expr, moments):
    """``E[expr]`` for a polynomial in ``xi``, from the moments."""
    poly = sp.Poly(sp.expand(expr), xi)
    return sum(coeff * moments[m] for (m,), coeff in zip(poly.monoms(), poly.coeffs()))


def gaussian_log_density(a, mu, log_sigma):
    """One dimension of a diagonal Gaussian policy: ``-((a - mu)/sigma)^2/2 - log sigma - log(2 pi)/2``."""
    return -((a - mu) ** 2) * sp.exp(-2 * log_sigma) / 2 - log_sigma - sp.log(2 * sp.pi) / 2


@proof(
    "pg.gaussian_score_zero_mean",
    statement="""For a diagonal Gaussian policy the score has zero expectation in every dimension:
    E[d log pi / d mu] = E[(a - mu) / sigma^2] = 0 and E[d log pi / d log sigma] = E[((a - mu)/sigma)^2 - 1] = 0;
    the joint log-density is the sum over dimensions, so the joint score is the stack of these.""",
    assumptions="a = mu + sigma xi with xi ~ N(0, 1); sigma = exp(log sigma) > 0; moments by integration.",
)
def gaussian_score_zero_mean(log_density=gaussian_log_density) -> ProofResult:
    mu, s, a = sp.symbols("mu s a", real=True)  # s = log sigma
    moments = standard_normal_moments()
    logp = log_density(a, mu, s)
    at = {a: mu + sp.exp(s) * xi}
    return combine([
        identity(sp.simplify(expectation(sp.diff(logp, mu).subs(at), moments)), 0, "E[d log pi / d mu] = 0"),
        identity(sp.simplify(expectation(sp.diff(logp, s).subs(at), moments)), 0, "E[d log pi / d log sigma] = 0"),
    ])


GAUSS_HERMITE_3 = ((sp.Integer(0), sp.Rational(2, 3)), (sp.sqrt(3), sp.Rational(1, 6)), (-sp.sqrt(3), sp.Rational(1, 6)))


@proof(
    "pg.gauss_hermite_three_nodes",
    statement="""The three-node Gauss-Hermite rule xi in {0, +-sqrt 3} with weights {2/3, 1/6, 1/6} gives
    E[p(xi)], xi ~ N(0, 1), exactly for every polynomial p of degree <= 5. A Gaussian score (degree <= 2
    in xi) times a weight of degree <= 3 is such a polynomial, so the checks' expected gradients over
    these nodes are exact expectations, not samples.""",
    assumptions="Exact arithmetic; the moments E[xi^k], k <= 5, by integration; degree counted per dimension.",
)
def gauss_hermite_three_nodes(rule=GAUSS_HERMITE_3) -> ProofResult:
    moments = standard_normal_moments()
    return combine([identity(sum(w * x**k for x, w in rule), moments[k], f"E[xi^{k}] = {moments[k]}") for k in range(6)])

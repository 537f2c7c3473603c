"""Proofs for the KL-estimator chapter (Schulman, "Approximating KL Divergence", 2020).

Samples come from the *sampler* p; ``x = log r = log q - log p`` is the log ratio against the
*other* distribution q, and each estimator is a function of x:

    k1(x) = -x        k2(x) = x^2 / 2        k3(x) = e^x - 1 - x   (= r - 1 - log r)

Categorical distributions over n outcomes have positive symbolic probabilities p_0..p_{n-2} and
p_{n-1} = 1 - (p_0 + ... + p_{n-2}), and likewise for q.
"""

from __future__ import annotations

import sympy as sp

from .. import contract
from .core import INCONCLUSIVE, PROVED, REFUTED, Identity, ProofResult, combine, identity, proof
from .pg import nonzero, rational_identity

MIN_OUTCOMES, MAX_OUTCOMES = 2, 6


def k1(x):
    return -x


def k2(x):
    return x**2 / 2


def k3(x):
    return sp.exp(x) - 1 - x


def positive(expr, variable, label: str) -> ProofResult:
    """``expr > 0`` for every positive ``variable``: proved if SymPy's assumptions decide it."""
    simplified = sp.simplify(expr)
    decided = [Identity(label, simplified, sp.Integer(0), ">")]
    if simplified.is_positive:
        return ProofResult(PROVED, [f"{label}: {simplified} > 0: proved"], identities=decided)
    for point in (sp.Rational(1, 3), sp.Integer(1), sp.Integer(3)):
        value = simplified.subs(variable, point)
        if value.is_number and not value.is_positive:
            return ProofResult(REFUTED, [f"{label}: refuted"], counterexample=f"{label}: at {variable} = {point} it is {value}",
                               identities=decided)
    return ProofResult(INCONCLUSIVE, [f"{label}: inconclusive"], counterexample=f"{label}: {simplified}", identities=decided)


@proof(
    "kl.k3_nonnegative",
    statement="""k3 = r - 1 - log r >= 0 for every r > 0, with equality only at r = 1: k3(1) = 0, k3'(1) = 0
    and k3''(r) = 1/r^2 > 0, so k3 is strictly convex with its unique minimum 0 at r = 1 (the tangent-line
    bound log r <= r - 1).""",
    assumptions="r = q(x)/p(x) > 0 (both distributions positive at the sample).",
)
def k3_nonnegative(estimator=k3) -> ProofResult:
    r = sp.Symbol("r", positive=True)
    f = estimator(sp.log(r))  # the estimator as a function of r
    return combine([
        identity(f.subs(r, 1), 0, "k3(1) = 0"),
        identity(sp.diff(f, r).subs(r, 1), 0, "k3'(1) = 0 (the minimum is at r = 1)"),
        positive(sp.diff(f, r, 2), r, "k3''(r) (strict convexity)"),
    ])


def categorical(n: int, name: str):
    """Probabilities of n outcomes: n - 1 positive symbols and the remainder to 1."""
    free = list(sp.symbols(f"{name}0:{n - 1}", positive=True))
    return free + [1 - sum(free)]


def kl_divergence(p, q):
    """``KL(p || q) = sum_i p_i (log p_i - log q_i)``: the definition."""
    return sum(pi * (sp.log(pi) - sp.log(qi)) for pi, qi in zip(p, q))


def expectation_under(p, q, estimator):
    """``E_p[k(log q - log p)]``: the estimator averaged over every outcome, weighted by the sampler."""
    return sum(pi * estimator(sp.log(qi) - sp.log(pi)) for pi, qi in zip(p, q))


@proof(
    "kl.k1_k3_unbiased",
    statement="""For categorical p, q with symbolic probabilities, E_p[k1] = E_p[-log r] = KL(p || q) and
    E_p[k3] = E_p[r - 1 - log r] = KL(p || q): E_p[r] = sum_i p_i q_i / p_i = sum_i q_i = 1.""",
    assumptions="""n = 2..6 outcomes; p_i, q_i > 0 with sum_i p_i = sum_i q_i = 1; samples drawn from p
    (the first argument of KL).""",
)
def k1_k3_unbiased(k1=k1, k3=k3) -> ProofResult:
    steps = []
    for n in range(MIN_OUTCOMES, MAX_OUTCOMES + 1):
        p, q = categorical(n, "p"), categorical(n, "q")
        kl = kl_divergence(p, q)
        steps.append(identity(expectation_under(p, q, k1), kl, f"n = {n}: E_p[k1] = KL(p || q)"))
        steps.append(identity(expectation_under(p, q, k3), kl, f"n = {n}: E_p[k3] = KL(p || q)"))
        if not steps[-1].ok or not steps[-2].ok:
            break
    return combine(steps)


def up_to_cubic(expr, eps):
    """The Taylor polynomial of ``expr`` in ``eps`` through eps^3 (directly when it is a polynomial)."""
    expanded = sp.expand(expr)
    if expanded.is_polynomial(eps):
        return sum(expanded.coeff(eps, k) * eps**k for k in range(4))
    return sp.series(expr, eps, 0, 4).removeO()


y = sp.Symbol("y")
LOG1P_CUBIC = sp.series(sp.log(1 + y), y, 0, 4).removeO()  # y - y^2/2 + y^3/3



def known_distributions(answer_id: str = "kl.known-k1"):
    """``(p, q)`` of a KL known answer (spec/contract/40_kl.toml) as exact rationals: the distributions its
    log-probabilities are the logarithms of."""
    answer = contract.known_answer(answer_id)
    return tuple(tuple(sp.Rational(v) for v in answer.exact(f"exp({side})")) for side in ("logp_sampler", "logp_other"))


KL_KNOWN_ANSWER = known_distributions()  # p = (1/5, 3/10, 1/2), q = (2/5, 2/5, 1/5)


@proof(
    "kl.k2_second_order",
    statement="""k2 = (log r)^2 / 2 agrees with KL to second order and is biased in general: for
    q_i = p_i (1 + eps h_i) with sum_i p_i h_i = 0, E_p[k2] - KL(p || q) = -(eps^3 / 6) E_p[h^3] + O(eps^4)
    (the eps^0, eps^1 and eps^2 terms vanish); at p = (1/5, 3/10, 1/2), q = (2/5, 2/5, 1/5) (the KL known answer)
    E_p[k2] - KL(p || q) is about 0.0371, not 0.""",
    assumptions="""n = 2, 3 outcomes, p_i > 0, h_i real with h_{n-1} fixed by sum_i p_i h_i = 0 (so q sums to
    1); series in eps about 0. The known answer's numbers are exact rationals.""",
)
def k2_second_order(k2=k2) -> ProofResult:
    eps = sp.Symbol("epsilon")
    steps = []
    for n in (2, 3):
        p = categorical(n, "p")
        h = list(sp.symbols(f"h0:{n - 1}", real=True))
        h.append(-sum(pi * hi for pi, hi in zip(p, h)) / p[-1])  # E_p[h] = 0
        # log r_i = log(1 + eps h_i) = L(eps h_i) + O(eps^4), L the cubic Taylor polynomial of log(1 + y);
        # the estimators are smooth, so composing with L changes E_p[k2] - KL only at O(eps^4).
        x = [LOG1P_CUBIC.subs(y, eps * hi) for hi in h]
        gap = sum(pi * up_to_cubic(k2(xi) - k1(xi), eps) for pi, xi in zip(p, x))  # KL = E_p[k1]
        series = sp.expand(gap)
        for order in range(3):
            steps.append(rational_identity(series.coeff(eps, order), 0, f"n = {n}: coefficient of eps^{order}"))
        third = -sum(pi * hi**3 for pi, hi in zip(p, h)) / 6
        steps.append(rational_identity(series.coeff(eps, 3), third, f"n = {n}: coefficient of eps^3 = -E_p[h^3] / 6"))
        if not all(s.ok for s in steps):
            return combine(steps)
    p, q = KL_KNOWN_ANSWER
    steps.append(nonzero(expectation_under(p, q, k2) - kl_divergence(p, q), "the KL known answer: E_p[k2] - KL(p || q)"))
    return combine(steps)


@proof(
    "kl.direction_matters",
    statement="""KL is not symmetric, so the estimators' direction is observable: at the KL known answer,
    p = (1/5, 3/10, 1/2), q = (2/5, 2/5, 1/5), KL(p || q) = 0.23321 and KL(q || p) = 0.20907, and k3 with the
    ratio inverted (p/q instead of q/p) averages E_p[p/q - 1 - log(p/q)] = 0.34176, neither of them.""",
    assumptions="Exact rationals; the three numbers are closed forms in logs of rationals.",
)
def direction_matters() -> ProofResult:
    p, q = KL_KNOWN_ANSWER
    forward, reverse = kl_divergence(p, q), kl_divergence(q, p)
    inverted = expectation_under(p, q, lambda x: k3(-x))
    return combine([
        nonzero(forward - reverse, "KL(p || q) - KL(q || p)"),
        nonzero(inverted - forward, "E_p[k3 with the ratio inverted] - KL(p || q)"),
        nonzero(inverted - reverse, "E_p[k3 with the ratio inverted] - KL(q || p)"),
    ])


ESTIMATORS = {"k1": k1, "k2": k2, "k3": k3}


def _published(exact_value, written, error, label: str) -> ProofResult:
    """The exact value, evaluated to 30 digits, is within ``error`` (half a unit in the last published decimal) of
    the ``written`` one."""
    value, written, error = sp.N(exact_value, 30), sp.Rational(written), sp.Rational(repr(error))
    decided = [Identity(label, error, sp.Abs(exact_value - written), ">=")]
    if abs(value - written) <= error:
        return ProofResult(PROVED, [f"{label}: {sp.N(value, 12)} rounds to {written}: proved"], identities=decided)
    return ProofResult(REFUTED, [f"{label}: refuted"], counterexample=f"{label}: the exact value = {sp.N(value, 12)}, published {written}",
                       identities=decided)


@proof(
    "kl.known_answer_values",
    statement="""The KL known answer's published numbers are its exact values rounded: with p = (1/5, 3/10, 1/2) and
    q = (2/5, 2/5, 1/5), the estimates k(log q_i - log p_i) per sample to 6 decimals and their expectations under the
    sampler to 8 (KL(p || q) = 0.23321131 for k1 and k3, E_p[k2] = 0.27035662; with the arguments swapped
    KL(q || p) = 0.20907355).""",
    assumptions="Exact rationals p, q (the distributions the contract's float64 log-probabilities are the logarithms "
                "of); each value evaluated to 30 significant digits.",
)
def known_answer_values(estimators=ESTIMATORS) -> ProofResult:
    steps = []
    for answer in contract.known_answers("kl_estimate").values():
        p, q = known_distributions(answer.id)
        k = estimators[answer.inputs["kind"]]
        per_sample = [k(sp.log(qi) - sp.log(pi)) for pi, qi in zip(p, q)]
        if "estimates" in answer.outputs:
            steps += [_published(v, w, answer.published_error("estimates"), f"{answer.id} estimates[{i}]")
                      for i, (v, w) in enumerate(zip(per_sample, answer.exact("estimates")))]
        name = "sum exp(logp_sampler) estimates"
        steps.append(_published(sum(pi * v for pi, v in zip(p, per_sample)), answer.exact(name), answer.published_error(name),
                                f"{answer.id} {name}"))
    return combine(steps)

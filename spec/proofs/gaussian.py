"""Proofs for the Gaussian-policy chapter: the diagonal Gaussian log-density and entropy, and the
tanh change of variables of Haarnoja et al. 2018 (arXiv:1801.01290, Appendix C).

Notation: a diagonal Gaussian policy has mean ``mu_d`` and standard deviation ``sigma_d = exp(s_d)`` per
action dimension; ``u`` is the pre-squash sample and ``a = tanh(u)`` the squashed action;
``softplus(x) = log(1 + e^x)``.
"""

from __future__ import annotations

import sympy as sp

from .core import ProofResult, combine, identity, proof

DIMS = (1, 2, 3, 4)
x, mu, t = sp.symbols("x mu t", real=True)
sigma = sp.Symbol("sigma", positive=True)
u = sp.Symbol("u", real=True)
TWO_PI = 2 * sp.pi


def normal_density(value, mean, std):
    return sp.exp(-((value - mean) ** 2) / (2 * std**2)) / (sp.sqrt(TWO_PI) * std)


def diag_log_density_closed_form(a, m, s):
    """``-1/2 sum_d ((a_d - mu_d) / sigma_d)^2 - sum_d log sigma_d - D/2 log(2 pi)``."""
    D = len(a)
    return (-sum(((a[d] - m[d]) / s[d]) ** 2 for d in range(D)) / 2 - sum(sp.log(s[d]) for d in range(D))
            - sp.Rational(D, 2) * sp.log(TWO_PI))


@proof(
    "gaussian.diag_log_density_sum",
    statement="""The log-density of a diagonal Gaussian, log prod_d N(a_d; mu_d, sigma_d^2), is the sum of the
    per-dimension log-densities, -1/2 sum_d ((a_d - mu_d)/sigma_d)^2 - sum_d log sigma_d - D/2 log(2 pi)
    (the joint log-probability of independent action dimensions is the sum over them).""",
    assumptions="sigma_d > 0; explicit for D = 1..4 with symbolic a, mu and sigma.",
)
def diag_log_density_sum(log_density=diag_log_density_closed_form) -> ProofResult:
    steps = []
    for D in DIMS:
        a = sp.symbols(f"a0:{D}", real=True)
        m = sp.symbols(f"mu0:{D}", real=True)
        s = sp.symbols(f"sigma0:{D}", positive=True)
        joint = sp.Mul(*[normal_density(a[d], m[d], s[d]) for d in range(D)])
        per_dim = sum(sp.expand_log(sp.log(normal_density(a[d], m[d], s[d])), force=True) for d in range(D))
        steps.append(identity(sp.expand_log(sp.log(joint), force=True), per_dim, f"D = {D}: log prod = sum log"))
        steps.append(identity(per_dim, log_density(a, m, s), f"D = {D}: sum of per-dimension terms = closed form"))
    return combine(steps)


def normalised() -> list[ProofResult]:
    """N(mu, sigma^2) integrates to 1: x = mu + sigma t maps it to the standard density (dx = sigma dt)."""
    phi = normal_density(t, 0, 1)
    return [identity(normal_density(mu + sigma * t, mu, sigma) * sigma, phi, "N(mu + sigma t) sigma = phi(t)"),
            identity(sp.integrate(phi, (t, -sp.oo, sp.oo)), 1, "int phi(t) dt = 1")]


def diag_entropy_closed_form(s):
    """``sum_d (1/2 log(2 pi e) + log sigma_d)``."""
    return sum(sp.log(TWO_PI * sp.E) / 2 + sp.log(sd) for sd in s)


@proof(
    "gaussian.entropy",
    statement="""A Gaussian N(mu, sigma^2) integrates to 1 and has entropy -E[log N] = 1/2 log(2 pi e sigma^2); a
    diagonal Gaussian's entropy is the sum sum_d (1/2 log(2 pi e) + log sigma_d), independent of the mean.""",
    assumptions="sigma > 0; the integrals are over the real line; the diagonal case for D = 1..4 by independence.",
)
def entropy(entropy_formula=diag_entropy_closed_form) -> ProofResult:
    # Standardise x = mu + sigma t (t ~ N(0, 1), density phi): log N(x) = -t^2/2 - log sigma - log(2 pi)/2, so
    # -E[log N] = E[t^2]/2 + log sigma + log(2 pi)/2, and E[t^2] = int t^2 phi(t) dt needs no symbols.
    phi = normal_density(t, 0, 1)
    steps = normalised()
    standardised = sp.expand_log(sp.log(normal_density(mu + sigma * t, mu, sigma)), force=True)
    steps.append(identity(standardised, -t**2 / 2 - sp.log(sigma) - sp.log(TWO_PI) / 2, "log N(mu + sigma t) in t"))
    second_moment = sp.integrate(t**2 * phi, (t, -sp.oo, sp.oo))
    steps.append(identity(second_moment, 1, "E[t^2] = 1"))
    one_dim = second_moment / 2 + sp.log(sigma) + sp.log(TWO_PI) / 2  # -E[log N] from the two lines above
    steps.append(identity(sp.expand_log(one_dim, force=True), sp.expand_log(entropy_formula([sigma]), force=True), "D = 1: -E[log N]"))
    for D in DIMS[1:]:
        s = sp.symbols(f"sigma0:{D}", positive=True)
        summed = sum(one_dim.subs(sigma, sd) for sd in s)  # independent dimensions: entropies add
        steps.append(identity(sp.expand_log(summed, force=True), sp.expand_log(entropy_formula(s), force=True),
                              f"D = {D}: sum of per-dimension entropies"))
    return combine(steps)


def tanh_jacobian(value):
    """``d tanh(u) / du = 1 - tanh(u)^2``."""
    return 1 - sp.tanh(value) ** 2


@proof(
    "gaussian.tanh_change_of_variables",
    statement="""For u ~ N(mu, sigma^2) and a = tanh(u), the density of a at a = tanh(u) is N(u) / (1 - tanh(u)^2):
    d tanh/du = 1 - tanh^2 and d atanh(a)/da = 1 / (1 - a^2), so log pi(a) = log N(u) - log(1 - tanh(u)^2), summed
    over dimensions; an affine map a' = c + r a (action bounds [low, high]: r = (high - low)/2) adds -log r per
    dimension; and the density of a integrates to 1 over (-1, 1) because the substitution a = tanh(u) turns the
    integral into that of N(u) (Haarnoja et al. 2018, Appendix C, eq. 21).""",
    assumptions="sigma > 0, r > 0, u real; tanh is a smooth bijection from the real line onto (-1, 1).",
)
def tanh_change_of_variables(jacobian=tanh_jacobian) -> ProofResult:
    a, r, c = sp.Symbol("a", real=True), sp.Symbol("r", positive=True), sp.Symbol("c", real=True)
    steps = [
        identity(sp.diff(sp.tanh(u), u), jacobian(u), "d tanh(u)/du = Jacobian"),
        identity(sp.diff(sp.atanh(a), a).subs(a, sp.tanh(u)), 1 / jacobian(u), "d atanh(a)/da at a = tanh(u) = 1/Jacobian"),
    ]
    # Density of a = tanh(u): p_A(tanh u) |d tanh/du| = p_U(u), i.e. log p_A = log p_U - log Jacobian.
    log_pa = sp.log(normal_density(u, mu, sigma)) - sp.log(jacobian(u))
    integrand = sp.exp(log_pa) * sp.diff(sp.tanh(u), u)  # p_A(tanh u) d tanh/du
    steps.append(identity(integrand, normal_density(u, mu, sigma), "p_A(tanh u) (d tanh/du) = N(u)"))
    # Affine bounds: a' = c + r tanh(u) has d a'/du = r (1 - tanh^2 u).
    steps.append(identity(sp.diff(c + r * sp.tanh(u), u), r * jacobian(u), "d (c + r tanh u)/du = r Jacobian"))
    # Normalisation by substitution: int_{-1}^{1} p_A(a) da = int p_A(tanh u) (d tanh/du) du = int N(u) du = 1.
    # (The integrand was shown above to be N(u); integrating N itself keeps a wrong Jacobian from sending SymPy
    # into a symbolic integral of N(u) (1 - tanh^2 u).)
    steps += normalised()
    return combine(steps)


def stable_log_jacobian(value):
    """``2 (log 2 - u - softplus(-2u))``: no tanh, no cancellation in 1 - tanh^2."""
    return 2 * (sp.log(2) - value - sp.log(1 + sp.exp(-2 * value)))


@proof(
    "gaussian.tanh_stable_form",
    statement="""log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)) for every real u, and the right side is even in u,
    so 2 (log 2 - |u| - softplus(-2|u|)) is the same function.""",
    assumptions="""u real. Both sides are logarithms of positive reals; equality of their exponentials gives
    equality of the logarithms (log is injective on the positive reals).""",
)
def tanh_stable_form(stable=stable_log_jacobian) -> ProofResult:
    sech2 = (1 - sp.tanh(u) ** 2).rewrite(sp.exp)
    return combine([
        identity(sp.simplify(sp.exp(stable(u)) - sech2), 0, "exp(stable form) = 1 - tanh(u)^2"),
        identity(sp.simplify(sp.exp(stable(-u)) - sech2), 0, "exp(stable form at -u) = 1 - tanh(u)^2 (even)"),
    ])

"""Proofs for the natural-gradient / TRPO chapter (Kakade 2001; Schulman et al. 2015,
arXiv:1502.05477, Appendix C).

Notation: ``theta`` the policy parameters, ``g`` the gradient of the surrogate, ``F`` the Fisher
matrix (symmetric positive definite), ``delta`` the KL budget (TRPO's max_kl). Symbolic matrices
are written through their Cholesky factor ``F = L L'`` (positive diagonal), so every ``F`` the
proofs use is SPD by construction and every identity holds for all SPD matrices of that size.
"""

from __future__ import annotations

import sympy as sp

from .core import ProofResult, combine, identity, proof

SIZES = (1, 2)
delta = sp.Symbol("delta", positive=True)
eps = sp.Symbol("epsilon")


def symmetric(n: int) -> sp.Matrix:
    """A generic symmetric n x n matrix; the proofs assume it positive definite (hence invertible)."""
    return sp.Matrix(n, n, lambda i, j: sp.Symbol(f"f{min(i, j)}{max(i, j)}"))


def vector(n: int, name: str) -> sp.Matrix:
    return sp.Matrix([sp.Symbol(f"{name}{i}") for i in range(n)])


def natural_step_formula(g: sp.Matrix, F: sp.Matrix, budget):
    """TRPO's step ``sqrt(2 delta / g'F^-1 g) F^-1 g`` (Schulman et al. 2015, App. C)."""
    direction = F.LUsolve(g).applyfunc(sp.cancel)  # F^-1 g, what conjugate gradient returns
    return sp.sqrt(2 * budget / sp.cancel((g.T * direction)[0])) * direction


# Every g is F x for exactly one x (F is invertible), so the proofs quantify over x and write g = F x:
# the identities stay fully general and SymPy cancels F^-1 F x = x without expression swell.


@proof(
    "trpo.step_size_meets_budget",
    statement="""Delta = sqrt(2 delta / g'F^-1 g) F^-1 g satisfies 1/2 Delta' F Delta = delta exactly, is
    stationary for the Lagrangian of max g'Delta s.t. 1/2 Delta'F Delta <= delta (g = lambda F Delta with
    lambda = g'Delta / (2 delta) > 0), and attains (g'Delta)^2 = 2 delta g'F^-1 g, the Cauchy-Schwarz bound in
    the F inner product, so it is the maximiser.""",
    assumptions="""F symmetric positive definite, g != 0 (so g'F^-1 g > 0), delta > 0. Explicit for n = 1, 2
    with symbolic entries (g = F x over all x); the algebra (F x = g, x'F x = g'x) does not depend on n.""",
)
def step_size_meets_budget(step=natural_step_formula) -> ProofResult:
    steps = []
    for n in SIZES:
        F, x = symmetric(n), vector(n, "x")
        g = F * x
        D = step(g, F, delta)
        steps.append(identity(sp.cancel((D.T * F * D)[0] / 2), delta, f"n = {n}: 1/2 Delta' F Delta = delta"))
        gain = (g.T * D)[0]
        lam = gain / (2 * delta)
        residual = (g - lam * F * D).applyfunc(sp.cancel)
        steps += [identity(residual[i], 0, f"n = {n}: stationarity, component {i}") for i in range(n)]
        quadratic = (g.T * x)[0]  # g'F^-1 g
        steps.append(identity(sp.cancel(gain**2), sp.expand(2 * delta * quadratic), f"n = {n}: (g' Delta)^2 = 2 delta g'F^-1 g"))
    return combine(steps)


def categorical_fisher(p):
    """The Fisher matrix of a categorical in its logits: ``diag(p) - p p'``."""
    return sp.diag(*p) - sp.Matrix(p) * sp.Matrix(p).T


@proof(
    "trpo.kl_second_order_is_fisher",
    statement="""For a categorical with logits z and the perturbation z + epsilon d, KL(softmax(z) || softmax(z +
    epsilon d)) = 1/2 epsilon^2 d'F d + O(epsilon^3) with F = diag(p) - p p' = sum_a p_a s_a s_a', s_a = e_a - p
    the score of action a (the value and the first derivative vanish at epsilon = 0); the reverse KL has the
    same expansion. For a Gaussian with mean mu + epsilon a and log-std log sigma + epsilon b the expansion gives
    F = diag(1/sigma^2, 2) in (mu, log sigma). By the chain rule a policy whose logits (or mean and log-std) are
    linear in theta, z = J theta, has F_theta = J'F J: the Hessian of the mean KL at theta_old is the Fisher
    matrix, for KL(old||new) and KL(new||old) alike.""",
    assumptions="""K = 2, 3 actions with symbolic logits and direction (the reverse KL: K = 2); sigma > 0.
    The KL is smooth in epsilon, so its Taylor coefficients are its derivatives at 0.""",
)
def kl_second_order_is_fisher(fisher=categorical_fisher) -> ProofResult:
    steps = []
    for K in (2, 3):
        # w_a = exp(z_a) > 0: the softmax becomes a rational function and exp(z_a + epsilon d_a) = w_a e^(epsilon d_a).
        w, d = [sp.Symbol(f"w{i}", positive=True) for i in range(K)], vector(K, "d")
        total, moved = sum(w), [w[i] * sp.exp(eps * d[i]) for i in range(K)]
        p = [wi / total for wi in w]
        # log p_a - log q_a = -epsilon d_a + log sum(moved) - log sum(w): the quotients written out, so SymPy
        # differentiates a log-sum-exp; each KL is kept as one fraction (sum_a w_a (...)) / sum(w).
        log_ratio = [-eps * d[a] + sp.log(sum(moved)) - sp.log(total) for a in range(K)]
        quadratic = sp.cancel((d.T * fisher(p) * d)[0])
        forms = [("KL(p||q)", sum(w[a] * log_ratio[a] for a in range(K)) / total)]
        if K == 2:
            forms.append(("KL(q||p)", sum(-moved[a] * log_ratio[a] for a in range(K)) / sum(moved)))
        for name, kl in forms:
            for order, expected in ((0, 0), (1, 0), (2, quadratic)):
                value = sp.cancel(kl.subs(eps, 0))
                steps.append(identity(sp.cancel(value - expected), 0, f"K = {K}: d^{order} {name} / d epsilon^{order} at 0"))
                kl = sp.diff(kl, eps) if order < 2 else None  # no third derivative: nothing reads it
        scores = [sp.Matrix([(1 if i == a else 0) - p[i] for i in range(K)]) for a in range(K)]
        outer = sum((p[a] * scores[a] * scores[a].T for a in range(K)), sp.zeros(K, K))
        F = fisher(p)
        steps += [identity(sp.cancel(outer[i, j] - F[i, j]), 0, f"K = {K}: E[s s'] = F, entry {i}{j}")
                  for i in range(K) for j in range(K)]
    a, b = sp.symbols("a b", real=True)
    sigma = sp.Symbol("sigma", positive=True)
    new_sigma = sigma * sp.exp(eps * b)
    gaussian_kl = eps * b + (sigma**2 + (eps * a) ** 2) / (2 * new_sigma**2) - sp.Rational(1, 2)  # log(new/old) = eps b
    for order, expected in ((0, 0), (1, 0), (2, a**2 / sigma**2 + 2 * b**2)):
        value = sp.simplify(sp.diff(gaussian_kl, eps, order).subs(eps, 0))
        steps.append(identity(value, expected, f"Gaussian: d^{order} KL / d epsilon^{order} at 0"))
    return combine(steps)


def natural_direction(g: sp.Matrix, F: sp.Matrix) -> sp.Matrix:
    return F.LUsolve(g)


@proof(
    "trpo.natural_direction_invariance",
    statement="""Under an invertible linear reparameterisation theta = M phi the gradient becomes M'g and the
    Fisher M'F M; the natural direction in phi, mapped back, is M (M'F M)^-1 M'g = F^-1 g, and the step size
    depends only on g'F^-1 g = (M'g)'(M'F M)^-1(M'g), so the TRPO step M Delta_phi = Delta_theta: the same change
    of policy whatever the coordinates. (A plain gradient step maps to M M'g, which differs unless M is orthogonal.)""",
    assumptions="""F SPD, M invertible (det M != 0); explicit for n = 2 with symbolic entries of F, M and
    g = F x. With a damping term the identity needs M'M = I (the damping delta I is not transformed).""",
)
def natural_direction_invariance(direction=natural_direction) -> ProofResult:
    n = 2
    F, x = symmetric(n), vector(n, "x")
    g = F * x
    M = sp.Matrix(n, n, lambda i, j: sp.Symbol(f"m{i}{j}"))
    g_phi, F_phi = (M.T * g).applyfunc(sp.expand), (M.T * F * M).applyfunc(sp.expand)
    d_phi = direction(g_phi, F_phi).applyfunc(sp.factor)
    mapped = (M * d_phi).applyfunc(sp.cancel)
    d_theta = direction(g, F).applyfunc(sp.cancel)
    steps = [identity(sp.cancel(mapped[i] - d_theta[i]), 0, f"M Delta_phi = Delta_theta, component {i}") for i in range(n)]
    q_theta = sp.cancel((g.T * d_theta)[0])
    q_phi = sp.cancel((g_phi.T * d_phi)[0])
    steps.append(identity(sp.cancel(q_phi - q_theta), 0, "g'F^-1 g is invariant (same step size)"))
    return combine(steps)

"""Strategies for the natural-gradient / TRPO chapter's operations: SPD systems for ``conjugate_gradient``,
small policies' parameters for ``fisher_vector_product``, Fisher matrices and gradients for ``natural_step``
(and linear reparameterisations of them), and the parameters of a tabulated surrogate and KL for
``line_search`` (the suite builds the callables: ``rlspec.checks.clauses.trpo.Scenario``).

``trpo_update``'s problems are drawn in the chapter itself (``rlspec.checks.clauses.trpo.update_problems``):
they filter on the chapter's exact Fisher and gradient (no ill-conditioned Fisher, no stationary point).
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.extra import numpy as hnp

from .base import real_arrays

POLICY_FAMILIES = ("categorical", "gaussian")


def rotation(n: int) -> np.ndarray:
    """A fixed orthogonal matrix: the Householder reflection of w = (1, 2, ..., n)."""
    w = np.arange(1.0, n + 1.0)
    return np.eye(n) - 2.0 * np.outer(w, w) / (w @ w)


def with_spectrum(eigenvalues, Q=None) -> np.ndarray:
    """The symmetric matrix Q diag(eigenvalues) Q' (Q: :func:`rotation` unless given)."""
    eigenvalues = np.asarray(eigenvalues, dtype=np.float64)
    Q = rotation(len(eigenvalues)) if Q is None else Q
    A = (Q * eigenvalues) @ Q.T
    return (A + A.T) / 2


def spd_matrices(*, n=st.integers(1, 8), max_condition: float = 1e6, scale=(-2.0, 2.0)):
    """Symmetric positive definite matrices with condition number up to ``max_condition``: the extreme
    eigenvalues s and s kappa, the others log-uniform between, in a drawn orthonormal basis (log10 s in
    ``scale``)."""
    if not max_condition >= 1.0 or not scale[0] <= scale[1]:
        raise InvalidArgument(f"need max_condition={max_condition!r} >= 1 and scale={scale!r} with low <= high")
    return _spd_matrices(n=n, max_condition=max_condition, scale=scale)


@st.composite
def _spd_matrices(draw, *, n=st.integers(1, 8), max_condition: float = 1e6, scale=(-2.0, 2.0)):
    size = draw(n, label="n")
    log_kappa = draw(st.floats(0.0, math.log10(max_condition)), label="log10 condition")
    fractions = draw(hnp.arrays(np.float64, size, elements=st.floats(0.0, 1.0)), label="eigenvalue positions")
    eigenvalues = 10.0 ** (log_kappa * fractions)
    eigenvalues[0] = 1.0
    if size > 1:
        eigenvalues[-1] = 10.0**log_kappa
    s = 10.0 ** draw(st.floats(*scale), label="log10 scale")
    basis = draw(hnp.arrays(np.float64, (size, size), elements=st.floats(-1.0, 1.0)), label="basis")
    Q, _ = np.linalg.qr(basis + np.eye(size) * 1e-3)
    return with_spectrum(s * eigenvalues, Q)


def vectors(n: int, *, max_abs: float = 10.0, min_norm: float = 1e-3):
    """Vectors of ``n`` elements in [-max_abs, max_abs] (flushed) with norm at least ``min_norm``."""
    if not 0 <= min_norm < max_abs:
        raise InvalidArgument(f"need 0 <= min_norm={min_norm!r} < max_abs={max_abs!r}")
    return real_arrays(n, -max_abs, max_abs).filter(lambda v: np.linalg.norm(v) >= min_norm)


def spd_systems():
    """``(A, b)``: an SPD matrix (condition up to 1e6, n in 1..8) and a right-hand side."""
    return _spd_systems()


@st.composite
def _spd_systems(draw):
    A = draw(spd_matrices())
    return A, draw(vectors(A.shape[0]), label="b")


def policy_points(*, families=POLICY_FAMILIES):
    """``(kind, features, size, params, v)``: a linear categorical (size actions) or diagonal Gaussian (size
    dimensions) policy of ``families`` on B in 1..4 states of m in 1..3 features, its parameters and a vector."""
    families = tuple(families)
    if not families or not set(families) <= set(POLICY_FAMILIES):
        raise InvalidArgument(f"families={families!r} must be a non-empty subset of {POLICY_FAMILIES}")
    return _policy_points(families)


def _n_params(kind: str, features, size: int) -> int:
    from ....reference import trpo as ref

    build = ref.linear_categorical if kind == "categorical" else ref.linear_diag_gaussian
    return build(np.asarray(features, dtype=np.float64), size).n_params


@st.composite
def _policy_points(draw, kinds):
    kind = draw(st.sampled_from(kinds), label="family")
    B, m = draw(st.integers(1, 4), label="B"), draw(st.integers(1, 3), label="m")
    size = draw(st.integers(2, 4) if kind == "categorical" else st.integers(1, 3), label="actions / dims")
    features = draw(real_arrays((B, m), -2.0, 2.0), label="features")
    n_params = _n_params(kind, features, size)
    theta = draw(real_arrays(n_params, -1.5, 1.5), label="params")
    v = draw(real_arrays(n_params, -2.0, 2.0), label="v")
    return kind, features, size, theta, v


def step_problems(*, max_condition: float = 100.0):
    """``(F, grad, max_kl)``: a Fisher matrix (n in 1..6, condition up to ``max_condition``), a gradient of norm
    at least 1e-2 and max_kl in [1e-4, 1]."""
    if not max_condition >= 1.0:
        raise InvalidArgument(f"max_condition={max_condition!r} must be >= 1")
    return _step_problems(max_condition)


@st.composite
def _step_problems(draw, max_condition: float = 100.0):
    F = draw(spd_matrices(n=st.integers(1, 6), max_condition=max_condition, scale=(-1.0, 1.0)))
    g = draw(vectors(F.shape[0], max_abs=5.0, min_norm=1e-2), label="grad")
    max_kl = 10.0 ** draw(st.floats(-4.0, 0.0), label="log10 max_kl")
    return F, g, max_kl


def reparameterised_problems():
    """``(F, grad, max_kl, M)``: a step problem (condition up to 30) and a linear reparameterisation theta = M phi
    with cond(M) <= 4."""
    return _reparameterised_problems()


@st.composite
def _reparameterised_problems(draw):
    F, g, max_kl = draw(step_problems(max_condition=30.0))
    n = F.shape[0]
    M = draw(hnp.arrays(np.float64, (n, n), elements=st.floats(-1.0, 1.0)), label="M") + 2.0 * np.eye(n)
    assume(np.linalg.cond(M) <= 4.0)
    return F, g, max_kl, M


def line_searches(*, failing: bool = False, ascent: bool = False, beta: float = 0.5):
    """``(x0, fullstep, a, b, c, d, max_kl, max_backtracks)``: surrogate S0 + a t + b t^2 and KL c t^2 + d t^3 along
    the step (t the fraction of fullstep moved), n in 1..4; ``failing``: no trial can qualify (the surrogate never
    rises, or the KL exceeds max_kl at every trial); ``ascent``: a > 0 (a declared accept ratio), and a failing
    scenario then falls at every trial (b t < -a for t >= beta^(max_backtracks - 1)) or exceeds the KL at every
    trial."""
    if not 0.0 < beta < 1.0:
        raise InvalidArgument(f"beta={beta!r} must be in (0, 1)")
    return _line_searches(failing=bool(failing), ascent=bool(ascent), beta=float(beta))


@st.composite
def _line_searches(draw, *, failing: bool = False, ascent: bool = False, beta: float = 0.5):
    n = draw(st.integers(1, 4), label="n")
    x0 = draw(real_arrays(n, -4.0, 4.0), label="x0")
    f = draw(vectors(n, max_abs=4.0, min_norm=1e-2), label="fullstep")
    max_kl = 10.0 ** draw(st.floats(-4.0, 0.0), label="log10 max_kl")
    max_backtracks = draw(st.integers(1, 10), label="max_backtracks")
    a = draw(st.floats(-1.0, 1.0), label="a")
    b = draw(st.floats(-4.0, 1.0), label="b")
    c = max_kl * 10.0 ** draw(st.floats(-2.0, 3.0), label="log10 c / max_kl")
    d = max_kl * draw(st.floats(0.0, 10.0), label="d / max_kl")
    if ascent:
        a = abs(a) + 1e-3
    if failing:  # no trial can qualify: the surrogate never rises, or the KL exceeds max_kl at every trial
        if draw(st.booleans(), label="never improves"):
            if ascent:
                b = -a / beta ** (max_backtracks - 1) * 10.0 ** draw(st.floats(0.1, 2.0), label="log10 fall")
            else:
                a, b = -abs(a) - 1e-3, -abs(b)
        else:
            c = max_kl * 2.0 ** (2 * max_backtracks) * 10.0 ** draw(st.floats(0.1, 2.0), label="log10 excess")
    return x0, f, a, b, c, d, max_kl, max_backtracks

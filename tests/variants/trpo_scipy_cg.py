"""Correct variant: conjugate gradient from SciPy (scipy.sparse.linalg.cg on a LinearOperator), the
natural step normalised with g'x instead of x'F x, and a line search over an explicit list of step
fractions. SciPy stops on |r| <= max(rtol |b|, atol): the protocol's tol bounds r'r, so atol = sqrt(tol);
inside natural_step it stops at |r| <= 1e-12, declared as natural_step_cg_tol = 1e-24 (on r'r)."""

import numpy as np
from scipy.sparse.linalg import LinearOperator, cg

RLSPEC_CONVENTIONS = {"natural_step_cg_tol": 1e-24}


def _solve(matvec, b, iters, atol):
    n = len(b)
    operator = LinearOperator((n, n), matvec=lambda v: np.asarray(matvec(np.asarray(v, dtype=b.dtype).ravel())), dtype=b.dtype)
    x, info = cg(operator, b, rtol=0.0, atol=atol, maxiter=int(iters))
    return np.asarray(x, dtype=b.dtype)


def conjugate_gradient(matvec, b, iters, tol):
    return _solve(matvec, b, iters, float(np.sqrt(tol)))


def natural_step(grad, fvp, max_kl, cg_iters):
    x = _solve(fvp, grad, cg_iters, 1e-12)
    return np.sqrt(2.0 * max_kl / (grad @ x)) * x


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks):
    fractions = 0.5 ** np.arange(max_backtracks)
    before = surrogate(x0)
    candidates = [x0 + f * fullstep for f in fractions]
    accepted = next((x for x in candidates if surrogate(x) > before and kl(x) <= max_kl), None)
    return x0.copy() if accepted is None else accepted

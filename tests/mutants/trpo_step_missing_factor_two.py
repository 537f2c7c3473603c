"""Mutant: the step size is sqrt(max_kl / g'F^-1 g), the factor 2 of the quadratic model 1/2 x'F x
forgotten: the step meets only half the KL budget."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TRPO-NATURAL-STEP-KL-BUDGET"], "bug": "step size sqrt(delta / g'F^-1 g): 1/2 Delta'F Delta = delta / 2"}


def _cg(matvec, b, iters):
    x, r = np.zeros_like(b), b.copy()
    p, rr = r.copy(), r @ r
    for _ in range(iters):
        if rr <= (np.finfo(b.dtype).eps * np.linalg.norm(b)) ** 2:
            break
        Ap = matvec(p)
        alpha = rr / (p @ Ap)
        x, r = x + alpha * p, r - alpha * Ap
        rr, rr_old = r @ r, rr
        p = r + (rr / rr_old) * p
    return x


def natural_step(grad, fvp, max_kl, cg_iters):
    x = _cg(fvp, grad, cg_iters)
    return np.sqrt(max_kl / (x @ fvp(x))) * x  # should be 2 * max_kl

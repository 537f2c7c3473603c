"""Mutant: the conjugation step is dropped, so every search direction is the current residual
(steepest descent with an exact line search). It converges, but at the rate (kappa - 1)/(kappa + 1)
per step instead of in n steps: a "CG" that stalls on ill-conditioned Fisher matrices."""

RLSPEC_MUTANT = {"clauses": ["TRPO-CG-SOLVES-SPD"], "bug": "E6a mushroomrl-cg-residual-stalls class: CG without the beta p term (directions not A-conjugate)"}


def conjugate_gradient(matvec, b, iters, tol):
    x = b * 0
    r = b * 1
    rr = (r * r).sum()
    for _ in range(int(iters)):
        if rr <= tol:
            break
        p = r  # should be r + (r_new'r_new / r'r) p
        Ap = matvec(p)
        alpha = rr / (p * Ap).sum()
        x = x + alpha * p
        r = r - alpha * Ap
        rr = (r * r).sum()
    return x

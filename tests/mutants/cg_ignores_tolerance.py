"""Mutant: the tolerance is taken but never tested: every one of the iters steps runs, however small r'r already is
(a CG written for a fixed iteration budget). The answer is more accurate than promised, and so are the steps TRPO
scales by it, but the candidate does not stop where it says it does (a natural_step_cg_tol declaration then lies)."""

RLSPEC_MUTANT = {"clauses": ["TRPO-CG-STOPPING-RULE"], "bug": "the conjugate gradient ignores its tolerance"}


def conjugate_gradient(matvec, b, iters, tol):
    x = b * 0
    r = b * 1
    p = r * 1
    rr = (r * r).sum()
    for _ in range(int(iters)):
        if rr == 0:
            break
        Ap = matvec(p)
        alpha = rr / (p * Ap).sum()
        x = x + alpha * p
        r = r - alpha * Ap
        new = (r * r).sum()
        p = r + (new / rr) * p
        rr = new
    return x

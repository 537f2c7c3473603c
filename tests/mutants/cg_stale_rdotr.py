"""Mutant: r'r is computed once and never updated, so alpha and beta use the first residual's norm
at every step (the `rdotr = new_rdotr` line forgotten): the directions lose conjugacy and the
residual does not reach zero."""

RLSPEC_MUTANT = {"clauses": ["TRPO-CG-SOLVES-SPD"], "bug": "E6a mushroomrl-cg-residual-stalls class: CG with a stale r'r (rdotr never updated)"}


def conjugate_gradient(matvec, b, iters, tol):
    x = b * 0
    r = b * 1
    p = r * 1
    rdotr = (r * r).sum()
    for _ in range(int(iters)):
        Ap = matvec(p)
        alpha = rdotr / (p * Ap).sum()
        x = x + alpha * p
        r = r - alpha * Ap
        new_rdotr = (r * r).sum()
        if new_rdotr <= tol:
            break
        p = r + (new_rdotr / rdotr) * p
        # missing: rdotr = new_rdotr
    return x

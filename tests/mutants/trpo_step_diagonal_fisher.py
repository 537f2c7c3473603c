"""Mutant: the Fisher matrix is approximated by its diagonal (read off with fvp(e_i)), a cheap
preconditioner: the step is diag(F)^-1 g scaled to the budget of the diagonal model. Exact only when
F is diagonal; otherwise neither the natural direction nor invariant to a change of coordinates."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TRPO-NATURAL-STEP-DIRECTION", "TRPO-NATURAL-STEP-INVARIANCE"],
                 "bug": "diagonal Fisher approximation in place of F^-1 g"}


def natural_step(grad, fvp, max_kl, cg_iters):
    n = len(grad)
    diagonal = np.array([fvp(np.eye(n, dtype=grad.dtype)[i])[i] for i in range(n)])
    x = grad / diagonal
    return np.sqrt(2 * max_kl / (x @ (diagonal * x))) * x

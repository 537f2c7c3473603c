"""Mutant: the Fisher matrix is used only to size the step, not to shape it: step = beta g with
1/2 step'F step = max_kl. This is what the natural step degenerates into when the Fisher-vector product
is a multiple of v (bug E4): the KL budget is met, the direction is not F^-1 g, and the
step depends on the parameterisation."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TRPO-NATURAL-STEP-DIRECTION", "TRPO-NATURAL-STEP-INVARIANCE"],
                 "bug": "E4 consequence: the natural step is a rescaled plain gradient"}


def natural_step(grad, fvp, max_kl, cg_iters):
    return np.sqrt(2 * max_kl / (grad @ fvp(grad))) * grad

"""Mutant, as Tianshou's NPG computes its step (bug R2, tianshou/algorithm/modelfree/npg.py): a
fixed 0.5 x (F + 0.1 I)^-1 g, with no normalisation to the KL budget and no line search. A valid
algorithm (natural gradient ascent with a learning rate), but not a step that meets max_kl."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TRPO-NATURAL-STEP-KL-BUDGET"], "bug": "R2 tianshou-npg-fixed-step (trust_region_size 0.5, no KL scaling)"}

DAMPING, TRUST_REGION_SIZE = 0.1, 0.5


def natural_step(grad, fvp, max_kl, cg_iters):
    x, r = np.zeros_like(grad), grad.copy()
    p, rr = r.copy(), r @ r
    for _ in range(cg_iters):
        z = fvp(p) + DAMPING * p
        alpha = rr / (p @ z)
        x, r = x + alpha * p, r - alpha * z
        new = r @ r
        p = r + (new / rr) * p
        rr = new
        if rr < 1e-10:
            break
    return TRUST_REGION_SIZE * x  # max_kl is not used

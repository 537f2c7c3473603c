"""Mutant: the step is computed from the gradient of the loss (minus the surrogate) and then added, or
from the surrogate's gradient and then subtracted: it descends the surrogate. (Tianshou solves with
grad(actor_loss) and steps along -x; dropping either sign gives this.)"""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TRPO-NATURAL-STEP-DIRECTION"], "bug": "natural step with the sign of the gradient flipped"}


def natural_step(grad, fvp, max_kl, cg_iters):
    g = -grad  # the loss's gradient
    x, r = np.zeros_like(g), g.copy()
    p, rr = r.copy(), r @ r
    for _ in range(cg_iters):
        if rr <= (np.finfo(g.dtype).eps * np.linalg.norm(g)) ** 2:
            break
        z = fvp(p)
        alpha = rr / (p @ z)
        x, r = x + alpha * p, r - alpha * z
        new = r @ r
        p = r + (new / rr) * p
        rr = new
    return np.sqrt(2 * max_kl / (x @ fvp(x))) * x  # ... and added as is

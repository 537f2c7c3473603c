"""Mutant: the step is computed with the damped Fisher F + 0.1 I, in the solve and in the normalisation
(as Tianshou's and sb3-contrib's TRPO do), but the candidate does not declare RLSPEC_CONVENTIONS
['damping'] = 0.1: against the undamped budget its quadratic KL 1/2 step'F step falls short of max_kl."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TRPO-NATURAL-STEP-KL-BUDGET"], "bug": "damped Fisher in the step size, undeclared (Tianshou / sb3-contrib damping 0.1)"}

DAMPING = 0.1


def natural_step(grad, fvp, max_kl, cg_iters):
    damped = lambda v: fvp(v) + DAMPING * v
    x, r = np.zeros_like(grad), grad.copy()
    p, rr = r.copy(), r @ r
    for _ in range(cg_iters):
        if rr <= (np.finfo(grad.dtype).eps * np.linalg.norm(grad)) ** 2:
            break
        z = damped(p)
        alpha = rr / (p @ z)
        x, r = x + alpha * p, r - alpha * z
        new = r @ r
        p = r + (new / rr) * p
        rr = new
    return np.sqrt(2 * max_kl / (x @ damped(x))) * x

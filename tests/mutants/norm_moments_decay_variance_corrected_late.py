"""Mutant: exponentially weighted moments by lerp of x and x^2 with Adam-style bias correction, the variance formed
before the correction: var = (E_raw[x^2] - E_raw[x]^2) / (1 - d^n) instead of E_raw[x^2] / (1 - d^n) - (E_raw[x] /
(1 - d^n))^2, so early on the variance holds d^n times the squared mean (TorchRL's VecNormV2)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["MOMENTS-CONCATENATION"], "bug": "the variance's bias correction applied after subtracting the mean's square"}
RLSPEC_CONVENTIONS = {"moments_decay": 0.5}
DECAY = 0.5


def running_moments(x, batch_end):
    loc, sq, count = np.zeros(x.shape[1]), np.zeros(x.shape[1]), 0.0
    for batch in np.split(x, np.flatnonzero(batch_end)[:-1] + 1):
        b = len(batch)
        count = DECAY * count + b
        weight = b / count  # the batch's share of the weighted count
        loc = loc + weight * (batch.mean(axis=0) - loc)
        sq = sq + weight * ((batch**2).mean(axis=0) - sq)
    # corrected moments would be loc and sq themselves here; the late correction keeps a d-weighted loc^2 term
    correction = 1 - DECAY ** len(np.flatnonzero(batch_end))
    var = (sq * correction - (loc * correction) ** 2) / correction
    return loc, var, np.asarray(count)

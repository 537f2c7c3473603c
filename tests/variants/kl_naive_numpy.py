"""Correct variant: the textbook forms (k3 = exp(x) - 1 - x, no expm1; k2 = x * x / 2), and an
adaptive KL coefficient with declared factor 1.5 and threshold 2 (beta * 1.5 when kl > 2 target,
beta / 1.5 when kl < target / 2), written with a multiplier table."""

import numpy as np

RLSPEC_CONVENTIONS = {"kl_adaptive_factor": 1.5, "kl_adaptive_threshold": 2.0}


def kl_estimate(logp_sampler, logp_other, kind):
    x = logp_other - logp_sampler
    if kind == "k1":
        return logp_sampler - logp_other
    if kind == "k2":
        return x * x / 2
    if kind == "k3":
        return np.exp(x) - 1.0 - x
    raise ValueError(kind)


def kl_coefficient_update(beta, kl, target):
    multiplier = 1.0
    if kl > 2.0 * target:
        multiplier = 1.5
    elif 2.0 * kl < target:
        multiplier = 1 / 1.5
    return beta * multiplier

"""Mutant: k1 is computed as log q - log p, the log ratio itself instead of its negative: the
arguments are read the other way round, and E_p[k1] = -KL(p || q) ("negative KL"; the k1 form of
bug D1's swap)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["KL-K1-UNBIASED", "KL-DIRECTION"], "bug": "D1 k3-with-swapped-ratio (the same swap in k1: negative KL)"}


def kl_estimate(logp_sampler, logp_other, kind):
    log_ratio = logp_other - logp_sampler
    if kind == "k1":
        return log_ratio
    if kind == "k2":
        return 0.5 * log_ratio**2
    return np.expm1(log_ratio) - log_ratio

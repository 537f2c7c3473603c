"""Mutant: k3 = r - 1 + log r, a sign slip easy to make when deriving the estimator ("E_p[r - 1 +
log r]"): it is negative for r < 1 and its mean is -KL."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["KL-K3-NONNEGATIVE", "KL-K3-UNBIASED"], "bug": "k3 written r - 1 + log r (a sign slip)"}


def kl_estimate(logp_sampler, logp_other, kind):
    log_ratio = logp_other - logp_sampler
    if kind == "k1":
        return -log_ratio
    if kind == "k2":
        return 0.5 * log_ratio**2
    return np.exp(log_ratio) - 1 + log_ratio

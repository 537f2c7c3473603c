"""Mutant: k2 = (log r)^2 without the 1/2, which no longer agrees with KL even to second order
(E_p[k2] = 0.5407 at the KL known answer)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["KL-K2-SECOND-ORDER", "KL-ESTIMATOR-VARIANCE"], "bug": "k2 without its factor 1/2"}


def kl_estimate(logp_sampler, logp_other, kind):
    log_ratio = logp_other - logp_sampler
    if kind == "k1":
        return -log_ratio
    if kind == "k2":
        return log_ratio**2
    return np.expm1(log_ratio) - log_ratio

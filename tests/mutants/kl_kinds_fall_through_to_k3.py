"""Mutant: a chain of `if` (not `elif`) lets every kind fall through to k3 (bug D7a: AReaL PR
#408's review). k3 is unbiased, so only the per-sample values give k1 and k2 away."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["KL-K1-UNBIASED", "KL-K2-SECOND-ORDER"], "bug": "D7a kl-estimator-kinds-fall-through-to-k3 (AReaL PR #408)"}


def kl_estimate(logp_sampler, logp_other, kind):
    log_ratio = logp_other - logp_sampler
    if kind == "k1":
        kl = -log_ratio
    if kind == "k2":
        kl = 0.5 * log_ratio**2
    kl = np.expm1(log_ratio) - log_ratio  # meant to be `if kind == "k3":`
    return kl

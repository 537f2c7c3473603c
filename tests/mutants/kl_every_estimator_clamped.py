"""Mutant: OpenRLHF's `compute_approx_kl`: log_ratio = log p - log q, k3 on log_ratio clamped at -10,
then every estimator (k1 and k2 too) clamped to [-10, 10] (bug R1; bugs D3, D4)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["KL-EXTREME-LOG-RATIO"], "bug": "R1 openrlhf-kl-estimates-clamped-to-ten"}


def kl_estimate(logp_sampler, logp_other, kind):
    log_ratio = logp_sampler - logp_other
    if kind == "k1":
        kl = log_ratio
    elif kind == "k2":
        kl = log_ratio**2 / 2.0
    else:
        log_ratio = np.maximum(log_ratio, -10.0)
        kl = np.exp(-log_ratio) - 1 + log_ratio
    return np.clip(kl, -10.0, 10.0)

"""Mutant: k3 uses the inverted ratio p/q with samples from p (bug D1: ColossalAI #3696,
`log_ratio = log_probs - log_probs_base` inside the k3 form): E_p = 0.3418 at the KL known answer, not 0.2332."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["KL-K3-UNBIASED", "KL-DIRECTION", "KL-ESTIMATOR-VARIANCE"], "bug": "D1 k3-with-swapped-ratio"}


def kl_estimate(logp_sampler, logp_other, kind):
    log_ratio = logp_other - logp_sampler
    if kind == "k1":
        return -log_ratio
    if kind == "k2":
        return 0.5 * log_ratio**2
    inverted = logp_sampler - logp_other
    return np.exp(inverted) - 1 - inverted

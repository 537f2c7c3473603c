"""Mutant: the log ratio is clamped to [-20, 20] before exp (the fix for bug D3's overflow to
NaN gradients): nothing overflows any more, but every estimate beyond |log r| = 20 is biased."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["KL-EXTREME-LOG-RATIO"], "bug": "D3 k3-exp-overflow-gives-NaN-gradient (the +-20 log-ratio clamp)"}


def kl_estimate(logp_sampler, logp_other, kind):
    log_ratio = np.clip(logp_other - logp_sampler, -20.0, 20.0)
    if kind == "k1":
        return -log_ratio
    if kind == "k2":
        return 0.5 * log_ratio**2
    return np.expm1(log_ratio) - log_ratio

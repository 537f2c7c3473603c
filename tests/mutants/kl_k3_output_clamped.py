"""Mutant: verl's `low_var_kl`: the log ratio is clamped to [-20, 20] and the k3 value to [-10, 10]
(bug D4): once k3 > 10 (log r > 2.6 or < -11) the estimate is biased low and has no gradient."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["KL-EXTREME-LOG-RATIO"], "bug": "D4 k3-output-clamp-kills-kl-gradient-on-most-divergent-tokens"}


def kl_estimate(logp_sampler, logp_other, kind):
    kl = np.clip(logp_other - logp_sampler, -20, 20)
    if kind == "k1":
        return -kl
    if kind == "k2":
        return 0.5 * kl**2
    return np.clip(np.exp(kl) - kl - 1, -10, 10)

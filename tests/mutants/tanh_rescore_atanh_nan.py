"""Mutant, as rlax's squashed_gaussian scores an action (rlax 0.1.9 through distrax): the pre-image is
atanh(action) with no clamp, which is +-inf once tanh(u) rounds to +-1, and the log-probability is NaN."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TANH-STABLE-AT-SATURATION"], "bug": "F2 scoring a saturated stored action through atanh: NaN (rlax, RLlib)"}


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    u = np.arctanh(np.tanh(pre_tanh))
    z = (u - mean) * np.exp(-log_std)
    log_n = np.sum(-0.5 * z**2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)
    return log_n - np.sum(2.0 * (np.log(2.0) - u - np.logaddexp(0.0, -2.0 * u)), axis=-1)

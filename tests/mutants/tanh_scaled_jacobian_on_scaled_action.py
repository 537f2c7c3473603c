"""Mutant (bug F5; cpnota/autonomous-learning-library #139): the correction log(1 - a^2 + 1e-6)
is evaluated on the action after scaling to the bounds, which leaves (-1, 1): log of a negative number,
NaN (u = 1, bounds [-2, 2]: a = 1.52)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TANH-SCALED-BOUNDS"], "bug": "F5 jacobian-evaluated-on-scaled-action"}


def scaled_tanh_gaussian_log_prob(mean, log_std, pre_tanh, low, high):
    z = (pre_tanh - mean) * np.exp(-log_std)
    log_n = np.sum(-0.5 * z**2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)
    action = low + 0.5 * (high - low) * (np.tanh(pre_tanh) + 1.0)
    return log_n - np.sum(np.log(1.0 - action**2 + 1e-6), axis=-1)

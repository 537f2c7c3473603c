"""Mutant: the textbook Jacobian log(1 - tanh(u)^2), evaluated as written. Exact in exact arithmetic,
it loses accuracy as tanh(u) nears 1 and becomes log(0) = -inf once tanh(u) rounds to 1 (|u| > 9 in
float32, > 19 in float64): the log-probability is +inf (garage PR #2129: -inf at the bound)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TANH-STABLE-AT-SATURATION"], "bug": "F3 naive log(1 - tanh(u)^2): infinite at saturation"}


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    z = (pre_tanh - mean) * np.exp(-log_std)
    log_n = np.sum(-0.5 * z**2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)
    return log_n - np.sum(np.log(1.0 - np.tanh(pre_tanh) ** 2), axis=-1)

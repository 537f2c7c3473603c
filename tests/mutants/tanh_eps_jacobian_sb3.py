"""Mutant, as SB3's SquashedDiagGaussianDistribution and CleanRL's SAC compute the correction
(bug R4): log(1 - tanh(u)^2 + 1e-6). Biased everywhere (2.4e-6 at u = 1) and
capped at -log(1e-6) = 13.8 per dimension once tanh saturates (error -24.8 at u = 20)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TANH-STABLE-AT-SATURATION", "TANH-LOG-PROB-CHANGE-OF-VARIABLES"],
                 "bug": "R4 squashed-gaussian-jacobian-epsilon (SB3 and CleanRL's log(1 - a^2 + 1e-6))"}


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    z = (pre_tanh - mean) * np.exp(-log_std)
    log_n = np.sum(-0.5 * z**2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)
    a = np.tanh(pre_tanh)
    return log_n - np.sum(np.log(1.0 - a**2 + 1e-6), axis=-1)

"""Mutant (bug F5; cpnota/autonomous-learning-library #154, boyu-ai/Hands-on-RL #44): the
correction is applied to the already squashed action, i.e. tanh twice: -log(1 - tanh(tanh(u))^2)
(u = 1: -0.8876 instead of -0.5514)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TANH-LOG-PROB-CHANGE-OF-VARIABLES", "TANH-DENSITY-INTEGRATES-TO-ONE"],
                 "bug": "F5 jacobian-evaluated-on-double-squashed-action"}


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    z = (pre_tanh - mean) * np.exp(-log_std)
    log_n = np.sum(-0.5 * z**2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)
    action = np.tanh(pre_tanh)
    return log_n - np.sum(np.log(1.0 - np.tanh(action) ** 2), axis=-1)  # squashed again inside the correction

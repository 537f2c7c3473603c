"""Mutant (bug F1; openai/spinningup #314): the squashed action is multiplied out to the
bounds after the log-probability is computed, so the affine map's Jacobian -sum log((high - low)/2) is
missing (u = 1, bounds [-2, 2]: -0.5514 instead of -1.2445)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TANH-SCALED-BOUNDS"], "bug": "F1 spinningup-sac-missing-act_limit-jacobian"}


def scaled_tanh_gaussian_log_prob(mean, log_std, pre_tanh, low, high):
    z = (pre_tanh - mean) * np.exp(-log_std)
    log_n = np.sum(-0.5 * z**2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)
    return log_n - np.sum(2.0 * (np.log(2.0) - pre_tanh - np.logaddexp(0.0, -2.0 * pre_tanh)), axis=-1)

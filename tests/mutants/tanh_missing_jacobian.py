"""Mutant: the action is squashed with tanh but its log-probability is the Gaussian log-density of the
pre-tanh sample, with no change-of-variables correction (u = 1: -1.4189 instead of -0.5514). The
"density" of a then integrates to E[sech(u)^2] < 1."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TANH-LOG-PROB-CHANGE-OF-VARIABLES", "TANH-DENSITY-INTEGRATES-TO-ONE"],
                 "bug": "tanh squashing without the Jacobian term"}


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    z = (pre_tanh - mean) * np.exp(-log_std)
    return np.sum(-0.5 * z**2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)

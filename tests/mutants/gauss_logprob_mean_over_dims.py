"""Mutant: the per-dimension log-densities are averaged (.mean(-1)) instead of summed, so the joint
log-probability of a D-dimensional action is 1/D of what it should be (independent dimensions: sum them)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAUSS-DIAG-LOG-PROB-CLOSED-FORM", "GAUSS-DIAG-LOG-PROB-SUM-OVER-DIMS"],
                 "bug": "diagonal Gaussian log-prob reduced with mean over action dimensions"}


def diag_gaussian_log_prob(mean, log_std, action):
    z = (action - mean) / np.exp(log_std)
    return np.mean(-0.5 * z**2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)

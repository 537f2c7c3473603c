"""Mutant: the network's log_std output is read as the log of the variance (sigma = exp(log_std / 2)),
a common mix-up between log-std and log-var heads."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAUSS-DIAG-LOG-PROB-CLOSED-FORM"], "bug": "log_std treated as log-variance"}


def diag_gaussian_log_prob(mean, log_std, action):
    var = np.exp(log_std)  # should be exp(2 log_std)
    return np.sum(-0.5 * (action - mean) ** 2 / var - 0.5 * np.log(2 * np.pi * var), axis=-1)

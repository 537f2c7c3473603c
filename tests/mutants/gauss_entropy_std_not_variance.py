"""Mutant: the entropy is written as 1/2 log(2 pi e sigma) instead of 1/2 log(2 pi e sigma^2)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAUSS-ENTROPY"], "bug": "Gaussian entropy with sigma in place of sigma^2"}


def diag_gaussian_entropy(log_std):
    return np.sum(0.5 * np.log(2 * np.pi * np.e * np.exp(log_std)), axis=-1)

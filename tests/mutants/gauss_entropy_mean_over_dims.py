"""Mutant: the per-dimension entropies are averaged instead of summed (dist.entropy().mean() over the
action dimensions), which scales the entropy bonus by 1/D."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAUSS-ENTROPY"], "bug": "diagonal Gaussian entropy averaged over action dimensions"}


def diag_gaussian_entropy(log_std):
    return np.mean(0.5 * (1.0 + np.log(2 * np.pi)) + log_std, axis=-1)

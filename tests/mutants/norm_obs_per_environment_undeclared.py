"""Mutant: every environment keeps its own statistics (N single-environment normalisers, as when a normalising
wrapper is applied inside each sub-environment) while the candidate declares the default shared statistics."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["OBS-NORM-ENVIRONMENTS"], "bug": "per-environment statistics where shared ones are declared"}


def normalize_observations(obs, train_steps):
    T, N, D = obs.shape
    out = np.empty_like(obs)
    for j in range(N):
        mean, var, count = np.zeros(D), np.ones(D), 0.0
        for t in range(T):
            if t < train_steps:
                delta = obs[t, j] - mean
                total = count + 1
                var = (var * count + delta**2 * count / total) / total
                mean, count = mean + delta / total, total
            out[t, j] = np.clip((obs[t, j] - mean) / np.sqrt(var + 1e-8), -10.0, 10.0)
    return out

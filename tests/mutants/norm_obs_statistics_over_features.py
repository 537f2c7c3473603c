"""Mutant: the statistics are reduced over the wrong axis: each environment's observation is standardised by the
mean and variance of its own features (a layer norm), not each feature by its running statistics over the
environments and steps."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["OBS-NORM-ENVIRONMENTS"], "bug": "statistics over the feature axis"}


def normalize_observations(obs, train_steps):
    T, N, D = obs.shape
    mean, var, count = np.zeros(N), np.ones(N), 0.0
    out = np.empty_like(obs)
    for t in range(T):
        rows = obs[t].T  # (D, N): the features as the batch axis
        if t < train_steps:
            delta = rows.mean(axis=0) - mean
            total = count + D
            var = (var * count + rows.var(axis=0) * D + delta**2 * count * D / total) / total
            mean, count = mean + delta * D / total, total
        out[t] = np.clip(((rows - mean) / np.sqrt(var + 1e-8)).T, -10.0, 10.0)
    return out

"""Mutant: the raw observations are clipped to [-10, 10] before the statistics see them (the clip meant for the
normalised output applied to the input): observations beyond the clip are lost to the mean and variance."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["OBS-NORM-CLIP-AFTER-STATISTICS"], "bug": "the clip applied before the statistics update"}


def normalize_observations(obs, train_steps):
    obs = np.clip(obs, -10.0, 10.0)
    mean, var, count = np.zeros(obs.shape[2]), np.ones(obs.shape[2]), 0.0
    out = np.empty_like(obs)
    for t in range(len(obs)):
        if t < train_steps:
            b = len(obs[t])
            delta = obs[t].mean(axis=0) - mean
            total = count + b
            var = (var * count + obs[t].var(axis=0) * b + delta**2 * count * b / total) / total
            mean, count = mean + delta * b / total, total
        out[t] = np.clip((obs[t] - mean) / np.sqrt(var + 1e-8), -10.0, 10.0)
    return out

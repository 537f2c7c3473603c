"""Mutant: each training step is normalised with the statistics from before it and only then folded in (the order
of the two lines swapped), while the candidate declares the default update-then-normalise."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["OBS-NORM-VALUES"], "bug": "normalise, then update, undeclared"}


def normalize_observations(obs, train_steps):
    mean, var, count = np.zeros(obs.shape[2]), np.ones(obs.shape[2]), 0.0
    out = np.empty_like(obs)
    for t in range(len(obs)):
        out[t] = np.clip((obs[t] - mean) / np.sqrt(var + 1e-8), -10.0, 10.0)
        if t < train_steps:
            b = len(obs[t])
            delta = obs[t].mean(axis=0) - mean
            total = count + b
            var = (var * count + obs[t].var(axis=0) * b + delta**2 * count * b / total) / total
            mean, count = mean + delta * b / total, total
    return out

"""Mutant: the statistics are updated on every step, evaluation included (the training flag is never read), so an
evaluation episode moves the normaliser the policy was trained with."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["OBS-NORM-EVALUATION-FROZEN"], "bug": "statistics updated at evaluation time"}


def normalize_observations(obs, train_steps):
    mean, var, count = np.zeros(obs.shape[2]), np.ones(obs.shape[2]), 0.0
    out = np.empty_like(obs)
    for t in range(len(obs)):
        b = len(obs[t])
        delta = obs[t].mean(axis=0) - mean
        total = count + b
        var = (var * count + obs[t].var(axis=0) * b + delta**2 * count * b / total) / total
        mean, count = mean + delta * b / total, total
        out[t] = np.clip((obs[t] - mean) / np.sqrt(var + 1e-8), -10.0, 10.0)
    return out

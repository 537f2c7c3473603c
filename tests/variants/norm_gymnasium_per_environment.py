"""Correct variant declaring per-environment statistics and no clip: one single-environment normaliser per
column, each a RunningMeanStd starting at count 1e-4 (as Gymnasium's NormalizeObservation / NormalizeReward
inside each sub-environment), the return accumulator reset after every episode end."""

import numpy as np

RLSPEC_CONVENTIONS = {"moments_initial_count": 1e-4, "normalization_scope": "per-environment", "observation_clip": None,
                      "reward_clip": None}


class _RMS:
    def __init__(self, shape=()):
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), 1e-4

    def update(self, x):
        delta = x.mean(axis=0) - self.mean
        total = self.count + len(x)
        self.var = (self.var * self.count + x.var(axis=0) * len(x) + delta**2 * self.count * len(x) / total) / total
        self.mean, self.count = self.mean + delta * len(x) / total, total


def normalize_observations(obs, train_steps):
    out = np.empty_like(obs)
    for j in range(obs.shape[1]):
        rms = _RMS(obs.shape[2:])
        for t in range(len(obs)):
            if t < train_steps:
                rms.update(obs[t, j][None])
            out[t, j] = (obs[t, j] - rms.mean) / np.sqrt(rms.var + 1e-8)
    return out


def scale_rewards(rewards, terminated, truncated, gamma):
    out = np.empty_like(rewards)
    for j in range(rewards.shape[1]):
        rms, ret = _RMS(), 0.0
        for t in range(len(rewards)):
            ret = gamma * ret + rewards[t, j]
            rms.update(np.array([ret]))
            out[t, j] = rewards[t, j] / np.sqrt(rms.var + 1e-8)
            if terminated[t, j] or truncated[t, j]:
                ret = 0.0
    return out

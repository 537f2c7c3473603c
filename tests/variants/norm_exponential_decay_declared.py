"""Correct variant declaring exponentially weighted statistics (moments_decay 0.5): before each update the running
count is halved, then the batch is merged by Chan's update with that weight, so a batch folded in k updates ago
weighs 2^-k. Observations and returns use the same statistics."""

import numpy as np

DECAY = 0.5
RLSPEC_CONVENTIONS = {"moments_decay": DECAY}


class _Weighted:
    def __init__(self, shape=()):
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), 0.0

    def update(self, batch):
        kept = DECAY * self.count  # the earlier samples' weight
        b = len(batch)
        total = kept + b
        delta = batch.mean(axis=0) - self.mean
        self.var = (self.var * kept + batch.var(axis=0) * b + delta**2 * kept * b / total) / total
        self.mean, self.count = self.mean + delta * b / total, total


def running_moments(x, batch_end):
    stats = _Weighted(x.shape[1:])
    for batch in np.split(x, np.flatnonzero(batch_end)[:-1] + 1):
        stats.update(batch)
    return stats.mean, stats.var, np.asarray(stats.count)


def normalize_observations(obs, train_steps):
    stats, out = _Weighted(obs.shape[2:]), np.empty_like(obs)
    for t in range(len(obs)):
        if t < train_steps:
            stats.update(obs[t])
        out[t] = np.clip((obs[t] - stats.mean) / np.sqrt(stats.var + 1e-8), -10.0, 10.0)
    return out


def scale_rewards(rewards, terminated, truncated, gamma):
    stats, returns, out = _Weighted(), np.zeros(rewards.shape[1]), np.empty_like(rewards)
    for t in range(len(rewards)):
        returns = gamma * returns + rewards[t]
        stats.update(returns)
        out[t] = np.clip(rewards[t] / np.sqrt(stats.var + 1e-8), -10.0, 10.0)
        returns = np.where(terminated[t] | truncated[t], 0.0, returns)
    return out

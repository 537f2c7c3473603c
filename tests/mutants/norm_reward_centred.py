"""Mutant: the reward is standardised, (r - mean_R) / std_R, instead of only divided by the return's std (subtracting
a constant from every reward changes the objective of episodes of different lengths)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["REWARD-SCALE-RETURN-STD"], "bug": "reward scaling centres the reward"}


class _Moments:
    def __init__(self):
        self.mean, self.var, self.count = 0.0, 1.0, 0.0

    def update(self, batch):
        b = len(batch)
        delta = batch.mean() - self.mean
        total = self.count + b
        self.var = (self.var * self.count + batch.var() * b + delta**2 * self.count * b / total) / total
        self.mean, self.count = self.mean + delta * b / total, total


def scale_rewards(rewards, terminated, truncated, gamma):
    stats, returns = _Moments(), np.zeros(rewards.shape[1])
    out = np.empty_like(rewards)
    for t in range(len(rewards)):
        returns = gamma * returns + rewards[t]
        stats.update(returns)
        out[t] = np.clip((rewards[t] - stats.mean) / np.sqrt(stats.var + 1e-8), -10.0, 10.0)
        returns = np.where(terminated[t] | truncated[t], 0.0, returns)
    return out

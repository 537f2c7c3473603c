"""Mutant: each reward is divided by the running std of the rewards themselves, not of the discounted return
(the accumulator is kept and reset, but never used)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["REWARD-SCALE-RETURN-STD"], "bug": "rewards scaled by the reward's std, not the return's"}


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
        stats.update(rewards[t])
        out[t] = np.clip(rewards[t] / np.sqrt(stats.var + 1e-8), -10.0, 10.0)
        returns = np.where(terminated[t] | truncated[t], 0.0, returns)
    return out

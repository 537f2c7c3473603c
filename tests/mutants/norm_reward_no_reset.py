"""Mutant: the return accumulator runs across episode ends: the next episode's return starts from gamma times the
previous one's."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["REWARD-SCALE-RESET-TERMINATED", "REWARD-SCALE-RESET-TRUNCATED"], "bug": "the return accumulator never reset"}


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
        out[t] = np.clip(rewards[t] / np.sqrt(stats.var + 1e-8), -10.0, 10.0)
    return out

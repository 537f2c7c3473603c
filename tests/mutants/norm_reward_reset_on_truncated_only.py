"""Mutant: the return accumulator is reset after a truncated step only (the done flag read from the time limit):
after a termination the next episode inherits the previous episode's return."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["REWARD-SCALE-RESET-TERMINATED"], "bug": "the accumulator reset on truncated only"}


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
        returns = np.where(truncated[t], 0.0, returns)
    return out

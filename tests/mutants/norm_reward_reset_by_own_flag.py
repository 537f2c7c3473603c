"""Mutant: R_t = gamma (1 - terminated_t) R_{t-1} + r_t: the terminated step's own flag zeroes the history, so the
terminal step's statistic is r_t alone and the next episode starts from gamma r_t; a truncation never resets it."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["REWARD-SCALE-RESET-TERMINATED", "REWARD-SCALE-RESET-TRUNCATED"], "bug": "the accumulator's history zeroed by the step's own terminated flag"}


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
        returns = gamma * (1.0 - terminated[t]) * returns + rewards[t]
        stats.update(returns)
        out[t] = np.clip(rewards[t] / np.sqrt(stats.var + 1e-8), -10.0, 10.0)
    return out

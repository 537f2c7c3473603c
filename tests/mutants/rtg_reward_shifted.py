"""Mutant: the buffer stores the reward that *preceded* each observation, so G_t starts from
r_{t-1} (bug A2, Spinning Up #50)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["RETURNS-REWARD-TO-GO"], "bug": "A2 spinningup-ppo-reward-shifted-by-one"}


def rewards_to_go(rewards, gamma):
    preceding = np.concatenate([np.zeros(1, dtype=rewards.dtype), rewards[:-1]])
    returns = np.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = preceding[t] + gamma * running
        returns[t] = running
    return returns

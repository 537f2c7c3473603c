"""Mutant: the time-limit bootstrap is folded into the caller's rewards in place,
``rewards[truncated] += gamma * next_values[truncated]``, as SB3 does to its own buffer (bug
B3). The advantages are right; the caller's array is silently changed."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-INPUTS-NOT-MUTATED"], "bug": "B3 bootstrap folded into the caller's rewards in place"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    only_truncated = truncated & ~terminated
    rewards[only_truncated] += gamma * next_values[only_truncated]
    done = terminated | truncated
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * np.where(done[t], 0.0, next_values[t]) - values[t]
        running = delta + gamma * lam * np.where(done[t], 0.0, running)
        advantages[t] = running
    return advantages, advantages + values

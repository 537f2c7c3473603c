"""Mutant: ``(1 - done)`` zeroes the bootstrap but not the recursion, so advantage leaks backwards
across every episode end (the trace mask (1 - end_t) on A_{t+1}: without it credit leaks backwards)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-NO-LEAK-ACROSS-BOUNDARY", "GRID-GAE-EXPECTATION-EXACT-CRITIC"], "bug": "missing trace mask (B5 class)"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * np.where(terminated[t], 0.0, next_values[t]) - values[t]
        running = delta + gamma * lam * running
        advantages[t] = running
    return advantages, advantages + values

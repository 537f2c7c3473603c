"""Mutant: the recursion runs forwards (``for t in range(T)``), carrying A_{t-1} into A_t instead
of A_{t+1}: the classic reversed-loop slip."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-BACKWARD-RECURSION", "GRID-GAE-EXPECTATION-EXACT-CRITIC"], "bug": "recursion in the wrong direction"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in range(len(rewards)):
        delta = rewards[t] + gamma * np.where(terminated[t], 0.0, next_values[t]) - values[t]
        running = delta + gamma * lam * running
        advantages[t] = running
        running = np.where(terminated[t] | truncated[t], 0.0, running)
    return advantages, advantages + values

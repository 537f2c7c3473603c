"""Mutant: at a truncation the bootstrap comes from ``values[t+1]``, the first state of the next
episode, instead of V(final observation) (bug B5, skrl's ``next_values = values[i+1]``;
historical ml-agents PR #574). The trace is cut correctly."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-TRUNCATION-BOOTSTRAP", "GRID-GAE-EXPECTATION-EXACT-CRITIC"], "bug": "B5 skrl-truncation-handling (bootstrap from the next episode)"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    T = len(rewards)
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in reversed(range(T)):
        next_value = values[t + 1] if t + 1 < T else next_values[t]
        bootstrap = np.where(terminated[t], 0.0, next_value)
        delta = rewards[t] + gamma * bootstrap - values[t]
        running = delta + gamma * lam * np.where(terminated[t] | truncated[t], 0.0, running)
        advantages[t] = running
    return advantages, advantages + values

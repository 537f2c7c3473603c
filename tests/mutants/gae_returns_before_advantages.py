"""Mutant: ``returns = advantages + values`` is read from the storage before the advantages are
written, so the value target is the old value prediction (bug B9, CleanRL PR #337)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-RETURNS-EQUAL-ADVANTAGES-PLUS-VALUES"], "bug": "B9 cleanrl-jax-returns-from-zero-advantages"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    storage = np.zeros_like(rewards)
    returns = storage + values  # too early: storage is still zero
    running = np.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * np.where(terminated[t], 0.0, next_values[t]) - values[t]
        running = delta + gamma * lam * np.where(terminated[t] | truncated[t], 0.0, running)
        storage[t] = running
    return storage, returns

"""Mutant: the truncation branch is tested first, so a step that is both terminated and truncated
(Gymnasium allows it) bootstraps from the value of a terminal state."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-TERMINAL-NO-BOOTSTRAP", "GRID-GAE-EXPECTATION-EXACT-CRITIC"], "bug": "truncated checked before terminated"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        bootstrap = np.where(truncated[t], next_values[t], np.where(terminated[t], 0.0, next_values[t]))
        delta = rewards[t] + gamma * bootstrap - values[t]
        running = delta + gamma * lam * np.where(terminated[t] | truncated[t], 0.0, running)
        advantages[t] = running
    return advantages, advantages + values

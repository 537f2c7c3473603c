"""Mutant: truncation only triggers value bootstrapping and is not an episode boundary, so the
trace runs on into the next episode (bug B5, skrl #224 in v1.3.0)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-NO-LEAK-ACROSS-BOUNDARY", "GRID-GAE-EXPECTATION-EXACT-CRITIC"], "bug": "B5 skrl-truncation-handling (truncation does not end the trace)"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        not_done = 1.0 - terminated[t]
        delta = rewards[t] + gamma * not_done * next_values[t] - values[t]
        running = delta + gamma * lam * not_done * running
        advantages[t] = running
    return advantages, advantages + values

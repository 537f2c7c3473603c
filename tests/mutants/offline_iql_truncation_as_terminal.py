"""Mutant: the critic's target masks the bootstrap with done = terminated or truncated, so a time-limit end looks
terminal and V(s') is dropped there."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["IQL-Q-TARGET"], "bug": "truncation treated as terminal in the IQL target"}


def iql_targets(target_q, rewards, next_values, terminated, truncated, gamma):
    done = np.logical_or(terminated, truncated)
    return np.min(target_q, axis=0), rewards + gamma * (1.0 - done) * next_values

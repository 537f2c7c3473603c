"""Mutant: the critic's target bootstraps from V(s') on every step, terminal ones too (the mask forgotten)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["IQL-Q-TARGET"], "bug": "terminal mask missing"}


def iql_targets(target_q, rewards, next_values, terminated, truncated, gamma):
    return np.min(target_q, axis=0), rewards + gamma * next_values

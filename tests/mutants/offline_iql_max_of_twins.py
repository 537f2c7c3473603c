"""Mutant: the value target takes the maximum of the twin target critics (optimistic) instead of the minimum."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["IQL-VALUE-TARGET"], "bug": "max of the twin target critics"}


def iql_targets(target_q, rewards, next_values, terminated, truncated, gamma):
    return np.max(target_q, axis=0), rewards + gamma * np.where(terminated, 0.0, next_values)

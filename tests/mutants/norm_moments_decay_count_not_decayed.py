"""Mutant: exponentially weighted statistics declared (moments_decay 0.5), but the running count is never decayed:
each batch merges with the weight b / (n + b) of the cumulative count, so the statistics forget nothing."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["MOMENTS-CONCATENATION"], "bug": "a declared decay that never decays the count"}
RLSPEC_CONVENTIONS = {"moments_decay": 0.5}


def running_moments(x, batch_end):
    mean, var, count = np.zeros(x.shape[1]), np.ones(x.shape[1]), 0.0
    for batch in np.split(x, np.flatnonzero(batch_end)[:-1] + 1):
        b = len(batch)
        delta = batch.mean(axis=0) - mean
        total = count + b
        var = (var * count + batch.var(axis=0) * b + delta**2 * count * b / total) / total
        mean, count = mean + delta * b / total, 0.5 * count + b  # the count decays only after the merge used it
    return mean, var, np.asarray(count)

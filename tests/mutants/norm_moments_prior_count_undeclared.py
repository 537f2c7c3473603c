"""Mutant: the running statistics start at count 1e-4 with mean 0 and variance 1, as SB3's and Gymnasium's
RunningMeanStd do, but the candidate does not declare moments_initial_count: the first batches are shrunk towards
the prior where the declared count (0) says they are the data's own."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["MOMENTS-INITIAL-COUNT"], "bug": "an undeclared initial count of 1e-4"}


def running_moments(x, batch_end):
    mean, var, count = np.zeros(x.shape[1]), np.ones(x.shape[1]), 1e-4
    start = 0
    for end in np.flatnonzero(batch_end):
        batch = x[start:end + 1]
        start = end + 1
        b = len(batch)
        delta = batch.mean(axis=0) - mean
        total = count + b
        mean = mean + delta * b / total
        var = (var * count + batch.var(axis=0) * b + delta**2 * count * b / total) / total
        count = total
    return mean, var, np.asarray(count)

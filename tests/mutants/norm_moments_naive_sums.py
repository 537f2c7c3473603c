"""Mutant: the running statistics keep sums of x and x^2 and return E[x^2] - E[x]^2 (the textbook one-pass
formula): exact in real arithmetic, but it cancels catastrophically once the mean is large against the spread."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["MOMENTS-LONG-STREAM"], "bug": "the variance as E[x^2] - E[x]^2 from running sums"}


def running_moments(x, batch_end):
    s1, s2, count = np.zeros(x.shape[1]), np.zeros(x.shape[1]), 0.0
    start = 0
    for end in np.flatnonzero(batch_end):
        batch = x[start:end + 1]
        start = end + 1
        s1 = s1 + batch.sum(axis=0)
        s2 = s2 + (batch**2).sum(axis=0)
        count += len(batch)
    mean = s1 / count
    return mean, s2 / count - mean**2, np.asarray(count)

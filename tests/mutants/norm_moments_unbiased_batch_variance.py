"""Mutant: each batch's variance is the unbiased one (torch.var's default, divided by b - 1) but it is merged into
the running statistics as a population variance (times b): every batch adds b / (b - 1) too much spread."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["MOMENTS-CONCATENATION"], "bug": "a batch's unbiased variance merged as a population variance"}


def running_moments(x, batch_end):
    mean, var, count = np.zeros(x.shape[1]), np.ones(x.shape[1]), 0.0
    start = 0
    for end in np.flatnonzero(batch_end):
        batch = x[start:end + 1]
        start = end + 1
        b = len(batch)
        batch_var = batch.var(axis=0, ddof=1) if b > 1 else np.zeros(x.shape[1])
        delta = batch.mean(axis=0) - mean
        total = count + b
        var = (var * count + batch_var * b + delta**2 * count * b / total) / total
        mean = mean + delta * b / total
        count = total
    return mean, var, np.asarray(count)

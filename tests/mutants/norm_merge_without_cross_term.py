"""Mutant: the pairwise merge adds the two samples' sums of squares but forgets the spread between their means
(delta^2 n_a n_b / n): the merged variance is the count-weighted mean of the two variances."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["MOMENTS-MERGE", "MOMENTS-CONCATENATION"], "bug": "the merge's cross term delta^2 n_a n_b / n is missing"}


def merge_moments(mean_a, var_a, count_a, mean_b, var_b, count_b):
    count = count_a + count_b
    mean = (mean_a * count_a + mean_b * count_b) / count
    return mean, (var_a * count_a + var_b * count_b) / count, np.asarray(float(count))


def running_moments(x, batch_end):
    mean, var, count = np.zeros(x.shape[1]), np.ones(x.shape[1]), 0.0
    start = 0
    for end in np.flatnonzero(batch_end):
        batch = x[start:end + 1]
        start = end + 1
        mean, var, count = merge_moments(mean, var, count, batch.mean(axis=0), batch.var(axis=0), len(batch))
        count = float(count)
    return mean, var, np.asarray(count)

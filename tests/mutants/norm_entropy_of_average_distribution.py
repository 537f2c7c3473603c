"""Mutant: the logged entropy is that of the batch's average distribution, H(mean_s pi(.|s)), not the mean of the
states' entropies: by concavity it is larger, and two deterministic rows on different actions read log 2."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["ENTROPY-BATCH-MEAN"], "bug": "the entropy of the average distribution"}


def diagnostic_entropy(logits, minibatch_end=None):
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    average = p.mean(axis=0)
    live = average > 0
    return np.asarray(-(average[live] * np.log(average[live])).sum())

"""Mutant: the entropy is -sum p log p with p = softmax(logits) and log p taken of it: a saturated action (p = 0)
gives 0 * log 0 = NaN."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["ENTROPY-BATCH-MEAN"], "bug": "0 log 0 evaluated as NaN"}


def diagnostic_entropy(logits, minibatch_end=None):
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.mean(-(p * np.log(p)).sum(axis=1)))

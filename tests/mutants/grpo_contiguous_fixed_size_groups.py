"""Mutant: the batch is reshaped into contiguous groups of one fixed size, view(-1, G) with G = N / number
of ids, as trainers that lay out n_samples_per_prompt responses back to back do (bug G6: AReaL #1673,
slime #1414). Right for sorted equal groups, wrong for interleaved ids or unequal sizes."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GROUP-UNSORTED-IDS"], "bug": "G6 groups formed by reshape, not by id"}


def group_advantages(scores, groups, kind):
    k = len(np.unique(groups))
    size = len(scores) // k
    r = scores[: k * size].reshape(k, size)
    mean = np.nanmean(r, axis=1, keepdims=True)
    if kind == "grpo":
        out = (r - mean) / (np.nanstd(r, axis=1, ddof=1, keepdims=True) + 1e-6)
    elif kind == "rloo":
        out = (r - mean) * size / (size - 1) if size > 1 else np.zeros_like(r)
    else:
        out = r - mean
    out = np.nan_to_num(out.reshape(-1))
    return np.concatenate([out, np.zeros(len(scores) - k * size)])

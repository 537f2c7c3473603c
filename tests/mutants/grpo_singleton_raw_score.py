"""Mutant: verl's compute_grpo_outcome_advantage: a group with one member is given mean 0 and std 1, so
its advantage is its raw score (r / (1 + eps)), while the candidate declares nothing (group_singleton =
'zero'): verl's [1, 0, 0, 1, 0.5, 2] with ids [a, a, a, a, b, c] gives 0.4999995 and 1.999998 for b, c."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GROUP-SINGLETON"], "bug": "R8 verl-grpo-singleton-group-raw-score, undeclared"}


def group_advantages(scores, groups, kind):
    out = np.zeros_like(scores)
    for g in np.unique(groups):
        idx = np.flatnonzero((groups == g) & ~np.isnan(scores))
        n = len(idx)
        if n == 0:
            continue
        r = scores[idx]
        if n == 1:
            mean, std = 0.0, 1.0
        else:
            mean, std = r.mean(), np.std(r, ddof=1)
        if kind == "grpo":
            out[idx] = (r - mean) / (std + 1e-6)
        elif kind == "rloo":
            out[idx] = r if n == 1 else (r - mean) * n / (n - 1)
        else:
            out[idx] = r - mean
    return out

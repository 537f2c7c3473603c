"""Mutant: verl's vectorised GRPO before PR #6348 (bug G8): the variance formed as E[r^2] - E[r]^2
and floored at 1e-6, so a group with a small spread is divided by 1e-3 instead of its std:
[1.0, 1.00001, 2.0, 2.00001] in groups [a, a, b, b] gives +-0.0050 instead of +-0.6196."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GROUP-LOW-VARIANCE"], "bug": "G8 verl-vectorized-grpo-shrinks-low-variance-groups"}


def group_advantages(scores, groups, kind):
    out = np.zeros_like(scores)
    for g in np.unique(groups):
        idx = np.flatnonzero((groups == g) & ~np.isnan(scores))
        n = len(idx)
        if n < 2:
            continue
        r = scores[idx]
        mean = r.mean()
        if kind == "grpo":
            var = (np.mean(r * r) - mean * mean) * n / (n - 1)
            out[idx] = (r - mean) / (np.sqrt(np.maximum(var, 1e-6)) + 1e-6)
        elif kind == "rloo":
            out[idx] = (r - mean) * n / (n - 1)
        else:
            out[idx] = r - mean
    return out

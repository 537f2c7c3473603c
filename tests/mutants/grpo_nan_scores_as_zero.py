"""Mutant: unscorable (NaN) scores replaced by 0 before the group statistics (nan_to_num on the reward
tensor), so a failed reward call counts as a wrong answer and shifts its siblings' baseline: TRL's
[1, nan, 0, 1] gives [0.866, 0, -0.866, 0.866] instead of [0.577, 0, -1.155, 0.577]."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GROUP-UNSCORABLE-EXCLUDED"], "bug": "NaN scores counted as 0 in the group statistics"}


def group_advantages(scores, groups, kind):
    unscorable = np.isnan(scores)
    scores = np.nan_to_num(scores, nan=0.0)
    out = np.zeros_like(scores)
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        if len(idx) < 2:
            continue
        r = scores[idx]
        c = r - r.mean()
        if kind == "grpo":
            out[idx] = c / (np.std(r, ddof=1) + 1e-6)
        elif kind == "rloo":
            out[idx] = c * len(r) / (len(r) - 1)
        else:
            out[idx] = c
    return np.where(unscorable, 0.0, out)

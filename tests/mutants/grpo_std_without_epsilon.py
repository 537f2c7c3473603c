"""Mutant: GRPO advantages divided by the group std with no epsilon: a group of identical scores gives
0 / 0 = NaN (bug G7; the all-correct or all-wrong group every GRPO batch has)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GROUP-IDENTICAL-SCORES"], "bug": "G7 std division without epsilon (NaN on identical rewards)"}


def group_advantages(scores, groups, kind):
    out = np.zeros_like(scores)
    with np.errstate(all="ignore"):
        for g in np.unique(groups):
            idx = np.flatnonzero((groups == g) & ~np.isnan(scores))
            if len(idx) < 2:
                continue
            r = scores[idx]
            c = r - r.mean()
            if kind == "grpo":
                out[idx] = c / np.std(r, ddof=1)
            elif kind == "rloo":
                out[idx] = c * len(r) / (len(r) - 1)
            else:
                out[idx] = c
    return out

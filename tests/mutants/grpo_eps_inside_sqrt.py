"""Mutant: the group std's epsilon put inside the square root, (r - m) / sqrt(var + eps), the form of a
masked_whiten, while the declared convention is / (std + eps): identical for spread-out scores, far off
for near ties (bug G9: [1, 1, 1, 1 + 1e-5] gives 0.0043 instead of 1.25)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GROUP-GRPO-VALUES", "GROUP-LOW-VARIANCE"], "bug": "G9 epsilon inside the square root (masked_whiten form)"}


def group_advantages(scores, groups, kind):
    out = np.zeros_like(scores)
    for g in np.unique(groups):
        idx = np.flatnonzero((groups == g) & ~np.isnan(scores))
        if len(idx) < 2:
            continue
        r = scores[idx]
        c = r - r.mean()
        if kind == "grpo":
            out[idx] = c / np.sqrt(np.sum(c**2) / (len(r) - 1) + 1e-6)
        elif kind == "rloo":
            out[idx] = c * len(r) / (len(r) - 1)
        else:
            out[idx] = c
    return out

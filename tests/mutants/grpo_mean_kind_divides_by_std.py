"""Mutant: the kind is ignored and every kind but 'rloo' is divided by the group std, as when a
norm_adv_by_std flag is dropped on the way to the advantage function (Dr. GRPO's mean-centring lost)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GROUP-MEAN-VALUES"], "bug": "kind 'mean' falls through to 'grpo' (std normalisation kept)"}


def group_advantages(scores, groups, kind):
    out = np.zeros_like(scores)
    for g in np.unique(groups):
        idx = np.flatnonzero((groups == g) & ~np.isnan(scores))
        if len(idx) < 2:
            continue
        r = scores[idx]
        c = r - r.mean()
        if kind == "rloo":
            out[idx] = c * len(r) / (len(r) - 1)
        else:
            out[idx] = c / (np.std(r, ddof=1) + 1e-6)
    return out

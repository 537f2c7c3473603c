"""Mutant: GRPO advantages centred on the group mean but divided by the std of the whole batch (TRL's
scale_rewards='batch', or a mean/std over the flat G * B vector as in bug G6, grpo-flat #2) while the
candidate declares per-group normalisation, the clause's only form."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GROUP-GRPO-VALUES"], "bug": "G6 group statistics computed over the wrong set (batch std)"}


def group_advantages(scores, groups, kind):
    scorable = ~np.isnan(scores)
    batch_std = np.std(scores[scorable], ddof=1) if scorable.sum() > 1 else 0.0
    out = np.zeros_like(scores)
    for g in np.unique(groups):
        idx = np.flatnonzero((groups == g) & scorable)
        if len(idx) < 2:
            continue
        r = scores[idx]
        c = r - r.mean()
        if kind == "grpo":
            out[idx] = c / (batch_std + 1e-6)
        elif kind == "rloo":
            out[idx] = c * len(r) / (len(r) - 1)
        else:
            out[idx] = c
    return out

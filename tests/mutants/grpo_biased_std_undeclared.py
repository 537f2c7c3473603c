"""Mutant: GRPO advantages normalised by np.std's default population std (ddof 0) while the candidate
declares nothing, i.e. the default group_std_ddof = 1 that verl, TRL and OpenRLHF use (bug G9: with
G = 2, [1, 0] gives +-1.0 instead of +-0.707)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GROUP-GRPO-VALUES"], "bug": "G9 biased std where the unbiased one is declared (np.std ddof 0)"}


def group_advantages(scores, groups, kind):
    out = np.zeros_like(scores)
    for g in np.unique(groups):
        idx = np.flatnonzero((groups == g) & ~np.isnan(scores))
        if len(idx) < 2:
            continue
        r = scores[idx]
        if kind == "grpo":
            out[idx] = (r - r.mean()) / (np.std(r) + 1e-6)
        elif kind == "rloo":
            out[idx] = r - (r.sum() - r) / (len(r) - 1)
        else:
            out[idx] = r - r.mean()
    return out

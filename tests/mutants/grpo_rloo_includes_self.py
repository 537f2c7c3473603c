"""Mutant: the RLOO baseline includes the sample itself (r - group mean), so the advantages are (1 - 1/G)
times the leave-one-out ones: [1, 0, 0, 1] gives +-0.5 instead of +-2/3, and the expected gradient is
(G - 1) grad J instead of G grad J."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GROUP-RLOO-LEAVE-ONE-OUT", "GROUP-BASELINE-BIAS"], "bug": "RLOO baseline includes the sample itself"}


def group_advantages(scores, groups, kind):
    out = np.zeros_like(scores)
    for g in np.unique(groups):
        idx = np.flatnonzero((groups == g) & ~np.isnan(scores))
        if len(idx) < 2:
            continue
        r = scores[idx]
        c = r - r.mean()
        out[idx] = c / (np.std(r, ddof=1) + 1e-6) if kind == "grpo" else c
    return out

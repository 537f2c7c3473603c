"""Mutant: whitening with no stabiliser (Tianshou's NPG/TRPO batch normalisation): identical
advantages give 0/0."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["PPO-ADVANTAGE-NORMALISATION-DEGENERATE"], "bug": "G7 std-normalisation-explodes-with-identical-rewards"}


def normalize_advantages(advantages):
    with np.errstate(all="ignore"):
        return (advantages - advantages.mean()) / advantages.std(ddof=1)

"""Mutant: the unbiased std of a one-element minibatch is 0/0 = NaN, and + 1e-8 cannot rescue it
(SB3 before 1.6.1, CleanRL, Tianshou's PPO)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["PPO-ADVANTAGE-NORMALISATION-DEGENERATE"], "bug": "C1 adv-normalisation-of-a-singleton-batch-is-NaN"}


def normalize_advantages(advantages):
    with np.errstate(all="ignore"):
        return (advantages - advantages.mean()) / (advantages.std(ddof=1) + 1e-8)

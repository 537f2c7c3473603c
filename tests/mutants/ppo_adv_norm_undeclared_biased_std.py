"""Mutant: numpy's std (ddof = 0, the population std) in a candidate that declares nothing, i.e. the
sample std (ddof = 1) that torch, SB3, CleanRL and Tianshou use."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["PPO-ADVANTAGE-NORMALISATION", "PPO-ADVANTAGE-NORMALISATION-BIAS"], "bug": "std ddof 0 where ddof 1 is declared (numpy's default vs torch's)"}


def normalize_advantages(advantages):
    return (advantages - advantages.mean()) / (np.std(advantages) + 1e-8)

"""Mutant: slime's distributed_masked_whiten(shift_mean=False) added the mean back after whitening
(x = [1, 3] -> [1.293, 2.707] instead of centred values)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["PPO-ADVANTAGE-NORMALISATION", "PPO-ADVANTAGE-NORMALISATION-BIAS"], "bug": "G15a whiten-adds-the-mean-back (slime #1369)"}


def normalize_advantages(advantages):
    mean = advantages.mean()
    return (advantages - mean) / (advantages.std(ddof=1) + 1e-8) + mean

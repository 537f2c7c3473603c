"""Mutant: the log-density clamps log_std to [-20, 2] (SB3's LOG_STD_MIN and LOG_STD_MAX, applied inside the actor) before
it scores the action: right for every policy that stays inside the clamp, wrong for a log_std of 5 or -25, which the
contract allows. An edge of the contract (a distribution parameter outside the range a library clamps to)."""

import math

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAUSS-DIAG-LOG-PROB-CLOSED-FORM"], "bug": "log_std clamped to [-20, 2] inside the log-density"}


def diag_gaussian_log_prob(mean, log_std, action):
    log_std = np.clip(log_std, -20.0, 2.0)
    z = (action - mean) * np.exp(-log_std)
    return np.sum(-0.5 * z * z - log_std - 0.5 * math.log(2 * math.pi), axis=-1)

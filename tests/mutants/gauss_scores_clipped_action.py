"""Mutant (bug F4; skrl GaussianMixin with clip_actions=True, tianshou #312): the sample is
clipped to the action bounds [-1, 1] and the clipped action is what gets scored, so the stored
log-probability is that of a different action (u = 1.5: -1.4189 instead of -2.0439)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAUSS-LOG-PROB-UNCLIPPED-ACTION"], "bug": "F4 logprob-of-clipped-action"}


def diag_gaussian_log_prob(mean, log_std, action):
    action = np.clip(action, -1.0, 1.0)  # clip_actions, then log_prob of the clipped action
    z = (action - mean) * np.exp(-log_std)
    return np.sum(-0.5 * z**2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)

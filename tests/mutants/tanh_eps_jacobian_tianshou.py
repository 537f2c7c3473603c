"""Mutant, as Tianshou's SAC corrects the log-probability (bug R4,
sac.py:25-39): log(1 - tanh(u)^2 + eps) with eps = float32 machine epsilon 1.19e-7; it stops growing at
about 15.9 per dimension for |u| >~ 9."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TANH-STABLE-AT-SATURATION"], "bug": "R4 squashed-gaussian-jacobian-epsilon (Tianshou's log(1 - a^2 + 1.19e-7))"}

EPS = float(np.finfo(np.float32).eps)


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    z = (pre_tanh - mean) * np.exp(-log_std)
    log_n = np.sum(-0.5 * z**2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)
    return log_n - np.sum(np.log(1.0 - np.tanh(pre_tanh) ** 2 + EPS), axis=-1)

"""Mutant, as TorchRL's TanhNormal.log_prob(action) and SB3's log_prob without gaussian_actions score a
stored squashed action (bug R5): the pre-image is recovered as atanh of the action clamped to
+-(1 - eps). Once tanh(u) saturates the recovered u is wrong (float64: at most 18.7 for any u > 18.7),
so the density of a different sample is returned."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TANH-STABLE-AT-SATURATION"], "bug": "R5 torchrl-tanhnormal-log-prob-of-saturated-action (SB3 re-scores the same way)"}


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    action = np.tanh(pre_tanh)  # what the buffer stores
    eps = np.finfo(action.dtype).eps
    u = np.arctanh(np.clip(action, -1.0 + eps, 1.0 - eps))
    z = (u - mean) * np.exp(-log_std)
    log_n = np.sum(-0.5 * z**2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)
    return log_n - np.sum(2.0 * (np.log(2.0) - u - np.logaddexp(0.0, -2.0 * u)), axis=-1)

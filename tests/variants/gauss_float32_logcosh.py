"""Correct variant computing in float32 whatever it receives (RLSPEC_PRECISION = "float32"), written
differently: the variance instead of the std, a loop over action dimensions, log(1 - tanh(u)^2) as
-2 log cosh(u) = 2 log 2 - 2 logaddexp(u, -u) (stable and even in u), the entropy as 1/2 log(2 pi e var)."""

import numpy as np

RLSPEC_PRECISION = "float32"
F = np.float32


def _per_dim(mean, log_std, x):
    var = np.exp(F(2) * log_std)
    return -F(0.5) * (x - mean) ** 2 / var - F(0.5) * np.log(F(2 * np.pi) * var)


def diag_gaussian_log_prob(mean, log_std, action):
    mean, log_std, action = (np.asarray(a, dtype=F) for a in (mean, log_std, action))
    total = np.zeros(mean.shape[0], dtype=F)
    for d in range(mean.shape[1]):
        total += _per_dim(mean[:, d], log_std[:, d], action[:, d])
    return total


def diag_gaussian_entropy(log_std):
    log_std = np.asarray(log_std, dtype=F)
    return np.sum(F(0.5) * np.log(F(2 * np.pi * np.e) * np.exp(F(2) * log_std)), axis=-1)


def _log_one_minus_tanh2(u):
    return F(2 * np.log(2)) - F(2) * np.logaddexp(u, -u)


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    mean, log_std, u = (np.asarray(a, dtype=F) for a in (mean, log_std, pre_tanh))
    return np.sum(_per_dim(mean, log_std, u) - _log_one_minus_tanh2(u), axis=-1)


def scaled_tanh_gaussian_log_prob(mean, log_std, pre_tanh, low, high):
    low, high = np.asarray(low, dtype=F), np.asarray(high, dtype=F)
    return tanh_gaussian_log_prob(mean, log_std, pre_tanh) - np.sum(np.log(high - low) - F(np.log(2)))

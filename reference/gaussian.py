"""Diagonal-Gaussian and tanh-squashed Gaussian policies (a diagonal Gaussian
per action dimension; the tanh change of variables of Haarnoja et al. 2018, arXiv:1801.01290, Appendix C).

    log N(a; mu, sigma)  = sum_d [-1/2 ((a_d - mu_d) / sigma_d)^2 - log sigma_d - 1/2 log(2 pi)]
    H                    = sum_d [1/2 log(2 pi e) + log sigma_d]
    a = tanh(u):  log pi(a) = log N(u; mu, sigma) - sum_d log(1 - tanh(u_d)^2)
                  log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))        (no cancellation, no tanh)
    a' = low + (high - low)(a + 1)/2:  log pi(a') = log pi(a) - sum_d log((high_d - low_d)/2)

Arrays (B, D) -> (B,), numpy; float32 in, float32 out. The squashed density is evaluated at the
pre-squash sample u, never at atanh(a): tanh(u) rounds to +-1 once |u| > 9 in float32 (> 19 in
float64), and atanh cannot recover u from there.
"""

from __future__ import annotations

import math

import numpy as np

LOG_2 = math.log(2.0)
LOG_2PI = math.log(2.0 * math.pi)


def diag_gaussian_log_prob(mean, log_std, action):
    """Joint log-density of a diagonal Gaussian: the sum over dimensions. (B, D) -> (B,)."""
    z = (action - mean) * np.exp(-log_std)  # (B, D) standardised action
    return np.sum(-0.5 * z * z - log_std - 0.5 * LOG_2PI, axis=-1)


def diag_gaussian_entropy(log_std):
    """Entropy of a diagonal Gaussian (independent of the mean). (B, D) -> (B,)."""
    return np.sum(0.5 * (1.0 + LOG_2PI) + log_std, axis=-1)


def tanh_log_det_jacobian(u):
    """``log(d tanh(u)/du) = log(1 - tanh(u)^2)`` in the stable form, elementwise."""
    return 2.0 * (LOG_2 - u - np.logaddexp(0.0, -2.0 * u))  # logaddexp(0, x) = softplus(x), no overflow


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    """log-density of a = tanh(u) at u = ``pre_tanh``, u ~ N(mean, exp(log_std)^2). (B, D) -> (B,)."""
    return diag_gaussian_log_prob(mean, log_std, pre_tanh) - np.sum(tanh_log_det_jacobian(pre_tanh), axis=-1)


def scale_action(squashed, low, high):
    """Map a in (-1, 1) to [low, high] (bounds (D,))."""
    return low + 0.5 * (high - low) * (squashed + 1.0)


def scaled_tanh_gaussian_log_prob(mean, log_std, pre_tanh, low, high):
    """log-density of ``scale_action(tanh(u), low, high)`` at u: the affine map adds -sum_d log((high - low)/2)."""
    return tanh_gaussian_log_prob(mean, log_std, pre_tanh) - np.sum(np.log(0.5 * (high - low)), axis=-1)

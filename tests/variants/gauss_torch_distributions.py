"""Correct variant: everything from torch.distributions (RLSPEC_ARRAY = "torch"). The squashed densities
are TransformedDistribution(Independent(Normal), [TanhTransform, AffineTransform]) scored at the very
tensor the transforms produced from the pre-tanh sample, so the cached pre-image is used (the transforms'
cache_size=1), never atanh of a saturated action."""

import torch
from torch.distributions import AffineTransform, Independent, Normal, TanhTransform, TransformedDistribution

RLSPEC_ARRAY = "torch"


def _base(mean, log_std):
    return Independent(Normal(mean, log_std.exp()), 1)


def diag_gaussian_log_prob(mean, log_std, action):
    return _base(mean, log_std).log_prob(action)


def diag_gaussian_entropy(log_std):
    return Normal(torch.zeros_like(log_std), log_std.exp()).entropy().sum(-1)


def _squashed(mean, log_std, pre_tanh, transforms):
    value = pre_tanh
    for transform in transforms:
        value = transform(value)  # cached: log_prob(value) recovers pre_tanh exactly
    return TransformedDistribution(_base(mean, log_std), transforms).log_prob(value)


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    return _squashed(mean, log_std, pre_tanh, [TanhTransform(cache_size=1)])


def scaled_tanh_gaussian_log_prob(mean, log_std, pre_tanh, low, high):
    half = (high - low) / 2
    return _squashed(mean, log_std, pre_tanh, [TanhTransform(cache_size=1), AffineTransform(low + half, half, cache_size=1)])

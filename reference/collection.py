"""Collecting a PPO batch and re-scoring it: the old log-probability is stored while acting, and the
loss's first ratio r = exp(log pi(a|s) - log pi_old(a|s)) is 1 because the loss scores exactly what the
collector scored (Schulman et al. 2017, arXiv:1707.06347 §3: r_t(theta_old) = 1).

    categorical    a ~ softmax(l)             log pi(a) = l_a - logsumexp(l)
    gaussian       a = mu + sigma eps         log pi(a) = sum_k log N(a_k; mu_k, sigma_k)
    tanh_gaussian  u = mu + sigma eps, a = tanh(u)
                                              log pi(a) = sum_k [log N(u_k; mu_k, sigma_k) - log(1 - tanh(u_k)^2)]

The squashed policy's buffer keeps the pre-tanh sample u beside the action (Haarnoja et al. 2018,
arXiv:1801.01290, Appendix C evaluates the density at u): tanh(u) rounds to +-1 once |u| > 9.01 in float32
(19.06 in float64), and no function of the rounded action can give back u. Torch (B, K) tensors; the policy
computes in their dtype.
"""

from __future__ import annotations

import math

import torch

LOG_2 = math.log(2.0)


def _log_prob(family, loc, scale, stored):
    """log pi of the stored sample: the action's index, the Gaussian action, or the pre-tanh sample u. (B,)"""
    if family == "categorical":
        return torch.log_softmax(loc, dim=-1).gather(-1, stored[:, None])[:, 0]
    z = (stored - loc) / scale  # (B, K)
    log_normal = (-0.5 * z * z - torch.log(scale) - 0.5 * math.log(2 * math.pi)).sum(-1)
    if family == "gaussian":
        return log_normal
    log_det = 2.0 * (LOG_2 - stored - torch.nn.functional.softplus(-2.0 * stored))  # log(1 - tanh(u)^2), stable
    return log_normal - log_det.sum(-1)


def collect(family, loc, scale, generator):
    """Act in every state; returns what the buffer keeps: (action, the sample log pi is taken at, log pi_old)."""
    if family == "categorical":
        action = torch.multinomial(torch.softmax(loc, dim=-1), 1, generator=generator)[:, 0]  # (B,)
        stored = action
    else:
        noise = torch.randn(loc.shape, generator=generator, dtype=loc.dtype)
        stored = loc + scale * noise  # (B, K): the action, or the pre-tanh sample u
        action = torch.tanh(stored) if family == "tanh_gaussian" else stored
    return action, stored, _log_prob(family, loc, scale, stored)


def ppo_collected_ratios(family, loc, scale, seed):
    """The first ratios of a PPO loss on a batch collected from the described policy. (B, K) -> (B,)"""
    generator = torch.Generator().manual_seed(int(seed))
    _, stored, logp_old = collect(family, loc, scale, generator)
    return torch.exp(_log_prob(family, loc, scale, stored) - logp_old)  # the loss re-scores what the buffer kept

"""PPO's clipped surrogate (Schulman et al. 2017, arXiv:1707.06347; seed 000 §2.7).

    r_t = exp(log pi(a_t|s_t) - log pi_old(a_t|s_t))                  ratio in log space
    L   = -mean_t min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)        minimised
"""

from __future__ import annotations

import torch


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    """Clipped surrogate loss; torch (B,) inputs -> scalar, differentiable in ``logp_new``."""
    ratio = torch.exp(logp_new - logp_old)  # (B,) exp of a difference: no overflow at logp ~ -1000
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    return -torch.min(unclipped, clipped).mean()

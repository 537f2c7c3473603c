"""Correct variant: torch tensors in and out, the clip written with torch.where (Spinning Up's
g(eps, A) form: min(r A, (1 + eps) A if A >= 0 else (1 - eps) A)), the clipped value loss picking
its branch with torch.where, and SB3's normalisation (skipped for a single element)."""

import torch
import torch.nn.functional as F

RLSPEC_ARRAY = "torch"


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    ratio = torch.exp(logp_new - logp_old)
    bound = torch.where(advantages >= 0, (1 + clip_eps) * advantages, (1 - clip_eps) * advantages)
    return -torch.min(ratio * advantages, bound).mean()


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    if old_values is None or clip_eps is None:
        return F.mse_loss(values, returns)
    unclipped = (values - returns) ** 2
    clipped = (old_values + (values - old_values).clamp(-clip_eps, clip_eps) - returns) ** 2
    return torch.where(unclipped >= clipped, unclipped, clipped).mean()


def normalize_advantages(advantages):
    if advantages.numel() < 2:
        return advantages.clone()
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def ppo_entropy_loss(entropy, coef):
    return -(coef * entropy).sum() / entropy.numel()

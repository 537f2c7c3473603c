"""Mutant: the clip applied to the log-ratio, clamp(log r, -eps, eps), so the clip range is
[exp(-eps), exp(eps)] = [0.819, 1.221] at eps = 0.2 instead of [0.8, 1.2]."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-CLIP-BOUNDARY"], "bug": "clip range exp(+-eps) from clipping the log-ratio instead of [1 - eps, 1 + eps]"}


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    log_ratio = logp_new - logp_old
    ratio = torch.exp(log_ratio)
    clipped = torch.exp(torch.clamp(log_ratio, -clip_eps, clip_eps))
    return -torch.min(ratio * advantages, clipped * advantages).mean()

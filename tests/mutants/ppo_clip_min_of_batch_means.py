"""Mutant: the pessimistic min taken between the two batch-averaged surrogates instead of per
sample, so one sample's clipped branch can hide another's unclipped one."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-CLIP-LOSS-VALUE"], "bug": "min taken after averaging (batch-level instead of per-sample pessimism; C3 class)"}


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    ratio = torch.exp(logp_new - logp_old)
    unclipped = (ratio * advantages).mean()
    clipped = (torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages).mean()
    return -torch.min(unclipped, clipped)

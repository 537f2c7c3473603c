"""Mutant: the clipped term is computed and then discarded (rllm #81: ``masked_mean(pg_losses)`` on the
unclipped losses instead of the max of both): plain importance-sampled policy gradient."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-CLIP-LOSS-VALUE", "PPO-CLIP-GRADIENT-TABLE"], "bug": "C3 clip-computed-but-unclipped-loss-returned"}


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    ratio = torch.exp(logp_new - logp_old)
    pg_losses = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    _ = torch.max(pg_losses, pg_losses2)  # computed, never used
    return pg_losses.mean()

"""Mutant: a dual-clip constant below 1 (PPOxFamily #95, ported from DI-engine): c A lies above the
clipped objective for every A < 0, so every negative-advantage sample is a constant."""

import torch

RLSPEC_CONVENTIONS = {"dual_clip": 0.5}
RLSPEC_MUTANT = {"clauses": ["PPO-DUAL-CLIP", "PPO-CLIP-GRADIENT-TABLE"], "bug": "C5 dual-clip-constant-below-one"}


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    ratio = torch.exp(logp_new - logp_old)
    clipped = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages)
    dual = torch.max(clipped, RLSPEC_CONVENTIONS["dual_clip"] * advantages)
    return -torch.where(advantages < 0, dual, clipped).mean()

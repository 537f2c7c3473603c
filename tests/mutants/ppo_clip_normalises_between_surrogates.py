"""Mutant: TorchRL before PR #1033 normalised the advantages after computing the first (unclipped)
surrogate and before the second, so the min compares r A_raw with clip(r) A_norm."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-FIRST-STEP-VANILLA-GRADIENT"], "bug": "C2 torchrl-advantage-normalised-after-first-surrogate"}


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    ratio = torch.exp(logp_new - logp_old)
    gain1 = ratio * advantages
    if advantages.numel() > 1:
        advantages = (advantages - advantages.mean()) / advantages.std().clamp_min(1e-6)
    gain2 = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages
    return -torch.min(gain1, gain2).mean()

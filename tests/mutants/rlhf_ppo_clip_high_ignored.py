"""Mutant: clip_high is swallowed and the range is the symmetric [1 - clip_low, 1 + clip_low] (a
renamed clip_ratio_high setting): DAPO's clip-higher does nothing (clip 0.2 / 0.28, A = 2, r = 1.25:
gradient 0 instead of -2.5)."""

import torch

RLSPEC_MUTANT = {"clauses": ["RLHF-PPO-ASYMMETRIC-CLIP"], "bug": "clip_ratio_high silently ignored (the C6 class for the upper bound)"}


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    m = mask.to(logp_new.dtype)
    ratio = torch.exp((logp_new - logp_old) * m)
    objective = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_low, 1 + clip_low) * advantages)
    if dual_clip is not None:
        objective = torch.where(advantages < 0, torch.max(objective, dual_clip * advantages), objective)
    return -(objective * m).sum()

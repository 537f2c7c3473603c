"""Mutant: bug C3 per token: the clipped surrogate is used alone, without the min with the
unclipped one; ratios that moved the wrong way lose their gradient (A = 2, r = 0.5: 0, not -1)."""

import torch

RLSPEC_MUTANT = {"clauses": ["RLHF-PPO-TOKEN-GRADIENT-TABLE"], "bug": "C3 clip-computed-but-unclipped-loss-returned (clip without min)"}


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    m = mask.to(logp_new.dtype)
    ratio = torch.exp((logp_new - logp_old) * m)
    objective = torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantages
    if dual_clip is not None:
        objective = torch.where(advantages < 0, torch.max(objective, dual_clip * advantages), objective)
    return -(objective * m).sum()

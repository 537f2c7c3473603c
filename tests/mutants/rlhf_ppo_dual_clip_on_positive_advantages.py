"""Mutant: bug C4 (Tianshou before PR #435) per token: max(min(s1, s2), c A) for every token;
for A > 0 the floor c A lies above the objective whenever r < c, so positive advantages lose their
gradient (c = 3, A = 2, r = 0.5: loss -6, gradient 0)."""

import torch

RLSPEC_MUTANT = {"clauses": ["RLHF-PPO-DUAL-CLIP"], "bug": "C4 tianshou-dual-clip-applied-to-positive-advantages"}


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    m = mask.to(logp_new.dtype)
    ratio = torch.exp((logp_new - logp_old) * m)
    objective = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantages)
    if dual_clip is not None:
        objective = torch.max(objective, dual_clip * advantages)
    return -(objective * m).sum()

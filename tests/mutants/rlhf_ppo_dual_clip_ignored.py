"""Mutant: bug C6: the dual_clip argument is accepted and silently ignored (A = -2, r = 3.5 with
c = 3 gives loss 7 and gradient 7 instead of 6 and 0)."""

import torch

RLSPEC_MUTANT = {"clauses": ["RLHF-PPO-DUAL-CLIP"], "bug": "C6 dual-clip-parameter-silently-ignored"}


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    m = mask.to(logp_new.dtype)
    ratio = torch.exp((logp_new - logp_old) * m)
    objective = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantages)
    return -(objective * m).sum()

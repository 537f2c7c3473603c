"""Mutant: bug C13 per token: r = exp(logp_new) / exp(logp_old); at log-probabilities near -1000
both underflow to 0 and the ratio is 0/0 = NaN."""

import torch

RLSPEC_MUTANT = {"clauses": ["RLHF-PPO-RATIO-LOG-SPACE"], "bug": "C13 ratio-by-dividing-probabilities"}


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    m = mask.to(logp_new.dtype)
    ratio = torch.exp(logp_new * m) / torch.exp(logp_old * m)
    objective = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantages)
    if dual_clip is not None:
        objective = torch.where(advantages < 0, torch.max(objective, dual_clip * advantages), objective)
    return -(objective * m).sum()

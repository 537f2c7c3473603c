"""Mutant: the per-token loss is summed over every position, the mask never applied (the class of
bugs G3, G5): garbage log-probabilities and advantages at padding enter the loss and padding
tokens get gradients."""

import torch

RLSPEC_MUTANT = {"clauses": ["RLHF-PPO-MASKED-TOKENS"], "bug": "G3 padding-leaks-into-reverse-kl-advantage (padding not masked in the loss)"}


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    ratio = torch.exp(logp_new - logp_old)
    objective = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantages)
    if dual_clip is not None:
        objective = torch.where(advantages < 0, torch.max(objective, dual_clip * advantages), objective)
    return -objective.sum()

"""Mutant: padding masked by multiplication instead of selection. The per-token loss is computed at every position and
then multiplied by the mask: at a padded position whose garbage log-probabilities put log r past exp's overflow (709.8
in float64, 88.7 in float32), r = inf and an advantage below 0 make the token's loss +inf, and inf x 0 = NaN poisons the
sum (and every gradient). Correct on ordinary padding, which is why it survives: an edge of the contract (masked garbage
past exp's overflow)."""

import torch

RLSPEC_MUTANT = {"clauses": ["RLHF-PPO-MASKED-TOKENS", "RLHF-PPO-TOKEN-GRADIENT-TABLE"],
                 "bug": "R48 trl-ppo-loss-masked-by-multiplication"}


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    ratio = torch.exp(logp_new - logp_old)
    objective = torch.min(ratio * advantages, torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages)
    if dual_clip is not None:
        objective = torch.where(advantages < 0, torch.max(objective, dual_clip * advantages), objective)
    return -(objective * mask.to(objective.dtype)).sum()

"""Mutant: verl's and OpenRLHF's ratio exp(clamp(logp_new - logp_old, -20, 20)), without declaring
log_ratio_clamp: beyond |log r| = 20 the ratio is frozen (A = -2, log r = 25: loss 2 e^20 with
gradient 0 instead of 2 e^25 with gradient 2 e^25). Correct once declared (tests/variants/rlhf_verl_style.py)."""

import torch

RLSPEC_MUTANT = {"clauses": ["RLHF-PPO-LOG-RATIO-CLAMP"], "bug": "D3 k3-exp-overflow-gives-NaN-gradient: its fix, the +-20 log-ratio clamp of verl and OpenRLHF, undeclared"}


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    m = mask.to(logp_new.dtype)
    ratio = torch.exp(torch.clamp(logp_new - logp_old, -20.0, 20.0))
    objective = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantages)
    if dual_clip is not None:
        objective = torch.where(advantages < 0, torch.max(objective, dual_clip * advantages), objective)
    return -(objective * m).sum()

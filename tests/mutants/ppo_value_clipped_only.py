"""Mutant: only the clipped prediction enters the loss (SB3 with clip_range_vf, skrl's value_clip): once
|V - V_old| > eps the value gradient is 0 even when V moved away from the target."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-VALUE-LOSS-CLIPPED"], "bug": "clipped-only value loss (SB3 / skrl; C9/C10 class)"}


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    if old_values is not None and clip_eps is not None:
        values = old_values + torch.clamp(values - old_values, -clip_eps, clip_eps)
    return ((values - returns) ** 2).mean()

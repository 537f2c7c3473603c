"""Mutant: the value clip measured against values recomputed with the current network (tf-agents
#352) instead of the stored V_old: V - V_old is 0, so the clipped loss is the plain one."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-VALUE-LOSS-CLIPPED"], "bug": "C9 value-clip-against-recomputed-old-value"}


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    unclipped = (values - returns) ** 2
    if old_values is None or clip_eps is None:
        return unclipped.mean()
    old_value_preds = values.detach()  # "old" values from the current network
    clipped = old_value_preds + torch.clamp(values - old_value_preds, -clip_eps, clip_eps)
    return torch.max(unclipped, (clipped - returns) ** 2).mean()

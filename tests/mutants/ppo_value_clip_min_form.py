"""Mutant: the older RLlib form (ray #2233): the min of the unclipped and clipped squared errors,
where OpenAI baselines takes the max."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-VALUE-LOSS-CLIPPED"], "bug": "C10 rllib-vf-clipping-semantics (tf.minimum of the two value losses, ray #2233)"}


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    unclipped = (values - returns) ** 2
    if old_values is None or clip_eps is None:
        return unclipped.mean()
    clipped = old_values + torch.clamp(values - old_values, -clip_eps, clip_eps)
    return torch.min(unclipped, (clipped - returns) ** 2).mean()

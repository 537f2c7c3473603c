"""Mutant: RLlib's value clipping since PR #22171 clamps the squared error itself at the clip
parameter: a sample whose error exceeds it gets no value gradient at all."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-VALUE-LOSS-CLIPPED"], "bug": "C10 rllib-vf-clipping-semantics"}


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    vf_loss = (values - returns) ** 2
    if old_values is None or clip_eps is None:
        return vf_loss.mean()
    return torch.clamp(vf_loss, 0, clip_eps).mean()

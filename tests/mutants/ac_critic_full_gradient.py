"""Mutant: the TD target is not detached, so the critic loss is a full gradient that also pushes
V(s') (bug A3: Farama Gymnasium #1494, `critic_loss = advantages.pow(2).mean()` with the
bootstrap still attached)."""

import torch

RLSPEC_MUTANT = {"clauses": ["AC-CRITIC-SEMI-GRADIENT"], "bug": "A3 actor-critic-missing-detach (critic target)"}


def actor_critic_losses(logp, values, next_values, rewards, terminated, truncated, gamma):
    delta = rewards + gamma * torch.where(terminated, 0.0, next_values) - values
    return -(logp * delta.detach()).mean(), delta.pow(2).mean()

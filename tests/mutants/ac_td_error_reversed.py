"""Mutant: the TD error is written V(s) - target. The squared critic loss does not notice, but the
actor's weight flips sign, so the policy moves away from better-than-expected actions."""

import torch

RLSPEC_MUTANT = {"clauses": ["AC-TD-ERROR", "AC-ACTOR-WEIGHT-DETACHED"], "bug": "TD error taken the other way round (V - target)"}


def actor_critic_losses(logp, values, next_values, rewards, terminated, truncated, gamma):
    target = rewards + gamma * torch.where(terminated, 0.0, next_values.detach())
    delta = values - target
    return -(logp * delta.detach()).mean(), delta.pow(2).mean()

"""Mutant: the actor loss uses delta without detaching it, so the policy-gradient term pushes
gradient into the critic through V(s) (bug A3: keras-io #194, baby-steps-of-rl-ja #16)."""

import torch

RLSPEC_MUTANT = {"clauses": ["AC-ACTOR-WEIGHT-DETACHED"], "bug": "A3 actor-critic-missing-detach (actor weight)"}


def actor_critic_losses(logp, values, next_values, rewards, terminated, truncated, gamma):
    target = rewards + gamma * torch.where(terminated, 0.0, next_values.detach())
    delta = target - values
    return -(logp * delta).mean(), delta.pow(2).mean()

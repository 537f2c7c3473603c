"""Mutant: SAC's actor loss calls the critics with their live parameters (SB3's, Tianshou's and skrl's code, which
is safe only because they zero the critics' gradients before the critics' own step): stepping one optimizer on the
sum of the losses trains the critics on the actor's objective."""

import math

import torch
import torch.nn.functional as F

RLSPEC_MUTANT = {"clauses": ["SAC-ACTOR-CRITIC-HELD-FIXED"], "bug": "H8 ddpg-actor-and-critic-updated-together (SAC: the actor loss reaches the critics)"}


def sac_actor_loss(policy, critic1, critic2, obs, alpha, noise):
    mean, log_std = policy(obs)
    u = mean + log_std.exp() * noise
    log_prob = (-0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi) - 2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
    a = torch.tanh(u)
    return (alpha * log_prob - torch.minimum(critic1(obs, a), critic2(obs, a))).mean()

"""Mutant: SAC's actor loss samples with dist.sample() instead of rsample(): the action is a constant of the
graph, so the critics' pathwise gradient never reaches the policy (only the density's dependence on mean and
std does) and the reparameterised gradient of arXiv:1801.01290 eq. 13 is lost."""

import math

import torch
from torch.func import functional_call

RLSPEC_MUTANT = {"clauses": ["SAC-ACTOR-LOSS-REPARAMETERISED"], "bug": "actor sample not reparameterised (sample, not rsample)"}


def _fixed(module, *inputs):
    return functional_call(module, {k: v.detach() for k, v in module.named_parameters()}, inputs)


def sac_actor_loss(policy, critic1, critic2, obs, alpha, noise):
    mean, log_std = policy(obs)
    u = (mean + log_std.exp() * noise).detach()  # dist.sample()
    z = (u - mean) / log_std.exp()
    log_prob = (-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi) - torch.log1p(-torch.tanh(u) ** 2)).sum(-1)
    a = torch.tanh(u)
    return (alpha * log_prob - torch.minimum(_fixed(critic1, obs, a), _fixed(critic2, obs, a))).mean()

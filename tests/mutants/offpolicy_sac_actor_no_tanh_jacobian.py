"""Mutant: SAC's actor scores the squashed action with the Gaussian density of the pre-tanh sample, leaving out
the tanh Jacobian -sum_d log(1 - tanh(u_d)^2) of arXiv:1801.01290 Appendix C (research bugs F5/F6: a squashed
policy scored as an unsquashed one)."""

import math

import torch
from torch.func import functional_call

RLSPEC_MUTANT = {"clauses": ["SAC-ACTOR-LOSS-REPARAMETERISED"], "bug": "tanh Jacobian missing in the actor's log-density"}


def _fixed(module, *inputs):
    return functional_call(module, {k: v.detach() for k, v in module.named_parameters()}, inputs)


def sac_actor_loss(policy, critic1, critic2, obs, alpha, noise):
    mean, log_std = policy(obs)
    u = mean + log_std.exp() * noise
    log_prob = (-0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    a = torch.tanh(u)
    return (alpha * log_prob - torch.minimum(_fixed(critic1, obs, a), _fixed(critic2, obs, a))).mean()

"""Mutant: the uniform proposal's density hard-coded for [-1, 1]^D, log(0.5^D), whatever the action bounds (as
TorchRL CQLLoss and Tianshou CQL write it): right on [-1, 1]^D, off by log(volume / 2^D) on any other box."""

import math

import torch

RLSPEC_MUTANT = {"clauses": ["CQL-SAMPLED-UNIFORM-DENSITY"], "bug": "[-1, 1]^d density for another box"}


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    random_density = math.log(0.5 ** action_low.shape[-1])
    t = torch.cat([q_uniform / temperature - random_density, q_policy / temperature - log_pi.detach()], dim=-1)
    log_z = torch.logsumexp(t, dim=-1) - math.log(t.shape[-1])
    return alpha * (temperature * log_z - q_data)

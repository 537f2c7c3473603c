"""Mutant: the policy's log-densities enter the critic's penalty with their graph: the value is right, but the penalty
sends gradient into the policy (d penalty / d log_pi = -alpha softmax_j instead of 0)."""

import math

import torch

RLSPEC_MUTANT = {"clauses": ["CQL-SAMPLED-GRADIENT"], "bug": "policy log-density not detached in the CQL penalty"}


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    log_uniform = -torch.log(action_high - action_low).sum()
    t = torch.cat([q_uniform / temperature - log_uniform, q_policy / temperature - log_pi], dim=-1)
    log_z = torch.logsumexp(t, dim=-1) - math.log(t.shape[-1])
    return alpha * (temperature * log_z - q_data)

"""Mutant: the policy's log-density with the wrong sign, Q + log pi: the policy's samples are weighted by pi instead of
1 / pi, so E[Z] is sum_a pi(a)^2 exp Q(a)-like instead of the partition function."""

import math

import torch

RLSPEC_MUTANT = {"clauses": ["CQL-SAMPLED-VALUES", "CQL-SAMPLED-IMPORTANCE-WEIGHTS"], "bug": "log-density added instead of subtracted"}


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    log_uniform = -torch.log(action_high - action_low).sum()
    t = torch.cat([q_uniform / temperature - log_uniform, q_policy / temperature + log_pi.detach()], dim=-1)
    log_z = torch.logsumexp(t, dim=-1) - math.log(t.shape[-1])
    return alpha * (temperature * log_z - q_data)

"""Mutant: the sampled log-partition without importance weights, logsumexp of the raw Q's (neither the uniform
density nor log pi subtracted): its inside estimates the proposals' average of exp(Q), not the partition function."""

import math

import torch

RLSPEC_MUTANT = {"clauses": ["CQL-SAMPLED-VALUES", "CQL-SAMPLED-IMPORTANCE-WEIGHTS"], "bug": "CQL importance weights missing"}


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    q = torch.cat([q_uniform, q_policy], dim=-1)
    log_z = torch.logsumexp(q / temperature, dim=-1) - math.log(q.shape[-1])
    return alpha * (temperature * log_z - q_data)

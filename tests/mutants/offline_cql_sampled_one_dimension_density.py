"""Mutant: the uniform log-density of one action dimension, -log(high_0 - low_0), for every dimension count (log(0.5)
in place of log(0.5^D) on [-1, 1]^D, the question of d3rlpy #147 answered the wrong way): right in one dimension,
off by the other dimensions' log-widths in D dimensions."""

import math

import torch

RLSPEC_MUTANT = {"clauses": ["CQL-SAMPLED-UNIFORM-DENSITY"], "bug": "uniform log-density log(0.5) for every dimension count"}


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    log_uniform = -torch.log(action_high[0] - action_low[0])  # the first dimension's log-density only
    t = torch.cat([q_uniform / temperature - log_uniform, q_policy / temperature - log_pi.detach()], dim=-1)
    log_z = torch.logsumexp(t, dim=-1) - math.log(t.shape[-1])
    return alpha * (temperature * log_z - q_data)

"""Mutant: the CQL authors' code's temperature form, T logsumexp((Q - log p) / T), without declaring it: the same at
T = 1, but each sample weighted by p^(-1/T) at any other temperature (biased however many samples)."""

import math

import torch

RLSPEC_MUTANT = {"clauses": ["CQL-SAMPLED-TEMPERATURE", "CQL-SAMPLED-VALUES"], "bug": "density inside the temperature (rlkit form) undeclared"}


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    log_uniform = -torch.log(action_high - action_low).sum()
    cat_q = torch.cat([q_uniform - log_uniform, q_policy - log_pi.detach()], dim=-1)
    log_z = torch.logsumexp(cat_q / temperature, dim=-1) - math.log(cat_q.shape[-1])
    return alpha * (temperature * log_z - q_data)

"""Mutant: the importance weights summed (logsumexp of the concatenation, as the CQL authors' code, TorchRL and
Tianshou do) while the candidate declares the default "mean": the penalty is T log n too large."""

import torch

RLSPEC_MUTANT = {"clauses": ["CQL-SAMPLED-VALUES", "CQL-SAMPLED-IMPORTANCE-WEIGHTS"], "bug": "sum normalisation undeclared"}


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    log_uniform = -torch.log(action_high - action_low).sum()
    t = torch.cat([q_uniform / temperature - log_uniform, q_policy / temperature - log_pi.detach()], dim=-1)
    return alpha * (temperature * torch.logsumexp(t, dim=-1) - q_data)

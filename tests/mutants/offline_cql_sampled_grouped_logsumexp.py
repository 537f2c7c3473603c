"""Mutant: Tianshou 2.0.1 CQL's shapes (tianshou/algorithm/imitation/cql.py): the reshape to (batch, samples, 1) is
discarded, so the logsumexp runs over groups of one sample per proposal and the groups are averaged, instead of
over all of a state's samples. With as many uniform as policy samples: mean_i logsumexp([t_u,i, t_pi,i])."""

import math

import torch

RLSPEC_MUTANT = {"clauses": ["CQL-SAMPLED-VALUES"], "bug": "Tianshou 2.0.1 CQL: logsumexp over groups of 3 (a no-op reshape)"}


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    log_uniform = -torch.log(action_high - action_low).sum()
    t_u = q_uniform / temperature - log_uniform
    t_p = q_policy / temperature - log_pi.detach()
    if t_u.shape[-1] == t_p.shape[-1]:
        log_z = torch.logsumexp(torch.stack([t_u, t_p], dim=-1), dim=-1).mean(dim=-1) - math.log(2)
    else:
        t = torch.cat([t_u, t_p], dim=-1)
        log_z = torch.logsumexp(t, dim=-1) - math.log(t.shape[-1])
    return alpha * (temperature * log_z - q_data)

"""Mutant: the weight written on the first term only, alpha logsumexp Q - Q(s, a_data): the push-up on the dataset's
action is not scaled with the push-down, and the penalty is no longer non-negative for alpha < 1."""

import torch

RLSPEC_MUTANT = {"clauses": ["CQL-PENALTY-VALUES", "GRID-CQL-LOWER-BOUND"], "bug": "alpha on the logsumexp term only"}


def cql_penalty(q_values, actions, alpha):
    return alpha * torch.logsumexp(q_values, dim=-1) - q_values.gather(-1, actions.unsqueeze(-1)).squeeze(-1)

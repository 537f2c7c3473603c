"""Mutant: the logsumexp term computed under no_grad (a "target" that should not be): the penalty's value is right,
but only the dataset's Q is pushed up; the expected gradient is -alpha nu instead of alpha (softmax(Q) - nu)."""

import torch

RLSPEC_MUTANT = {"clauses": ["CQL-PENALTY-EXPECTED-GRADIENT", "GRID-CQL-LOWER-BOUND"], "bug": "CQL logsumexp term detached"}


def cql_penalty(q_values, actions, alpha):
    with torch.no_grad():
        log_partition = torch.logsumexp(q_values, dim=-1)
    return alpha * (log_partition - q_values.gather(-1, actions.unsqueeze(-1)).squeeze(-1))

"""Mutant: the log-partition written as log(sum(exp(q))) without subtracting the maximum: exact for moderate Q, inf
(or nan) once exp overflows (Q above 88.7 in float32, 709.8 in float64)."""

import torch

RLSPEC_MUTANT = {"clauses": ["CQL-PENALTY-LARGE-Q"], "bug": "naive log(sum(exp(q))) overflows"}


def cql_penalty(q_values, actions, alpha):
    log_partition = torch.log(torch.exp(q_values).sum(dim=-1))
    return alpha * (log_partition - q_values.gather(-1, actions.unsqueeze(-1)).squeeze(-1))

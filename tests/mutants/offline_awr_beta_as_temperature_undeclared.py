"""Mutant: beta used as a temperature, exp(A / beta) (AWR's and AWAC's convention), while the candidate declares the
default inverse temperature (IQL's exp(beta A))."""

import torch

RLSPEC_MUTANT = {"clauses": ["AWR-WEIGHT-VALUES"], "bug": "beta as a temperature, undeclared"}


def awr_loss(log_prob, advantages, beta):
    return -torch.exp(advantages.detach() / beta).clamp(max=100.0) * log_prob

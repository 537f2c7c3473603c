"""Mutant: the inverse temperature applied twice: the advantages scaled by beta when they are formed, then again in
the exponent, w = exp(beta^2 A)."""

import torch

RLSPEC_MUTANT = {"clauses": ["AWR-WEIGHT-VALUES", "AWR-TARGET-POLICY"], "bug": "temperature applied twice"}


def awr_loss(log_prob, advantages, beta):
    scaled = beta * advantages.detach()
    return -torch.exp(beta * scaled).clamp(max=100.0) * log_prob

"""Mutant: the clip applied to the exponent, exp(min(beta A, 100)), instead of to the weight, min(exp(beta A), 100):
beta A = 6 gives e^6 = 403.4, and beta A >= 100 gives e^100 (inf in float32)."""

import torch

RLSPEC_MUTANT = {"clauses": ["AWR-WEIGHT-CLIP"], "bug": "AWR weight clipped before the exponential"}


def awr_loss(log_prob, advantages, beta):
    return -torch.exp((beta * advantages.detach()).clamp(max=100.0)) * log_prob

"""Mutant: the advantage weight keeps its graph: the values are right, but the actor loss sends gradient into the
advantages (and so into Q and V)."""

import torch

RLSPEC_MUTANT = {"clauses": ["AWR-WEIGHT-DETACHED"], "bug": "AWR weight not detached"}


def awr_loss(log_prob, advantages, beta):
    return -torch.exp(beta * advantages).clamp(max=100.0) * log_prob

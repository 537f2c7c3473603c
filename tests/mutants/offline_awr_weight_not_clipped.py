"""Mutant: the advantage weight exp(beta A) without its clip: beta A = 6 gives 403.4 instead of 100, and large
advantages overflow to inf (inf * log pi, nan gradients)."""

import torch

RLSPEC_MUTANT = {"clauses": ["AWR-WEIGHT-CLIP", "AWR-WEIGHT-VALUES", "AWR-TARGET-POLICY"], "bug": "AWR weight not clipped"}


def awr_loss(log_prob, advantages, beta):
    return -torch.exp(beta * advantages.detach()) * log_prob

"""Mutant: IQL's expectile loss with the residual taken the other way round, u = prediction - target, and the weights
kept: tau now weights over-prediction, so the value fits the (1 - tau)-expectile (below the mean for tau = 0.7)
instead of approaching the in-support maximum."""

import torch

RLSPEC_MUTANT = {"clauses": ["EXPECTILE-VALUES", "EXPECTILE-MINIMISER"], "bug": "IQL expectile weight reversed"}


def expectile_loss(target, prediction, tau):
    diff = prediction - target
    weight = torch.where(diff > 0, torch.full_like(diff, tau), torch.full_like(diff, 1 - tau))
    return weight * diff**2

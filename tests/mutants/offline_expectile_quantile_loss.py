"""Mutant: the quantile (pinball) loss |tau - 1(u < 0)| |u| in place of the expectile's squared residual (expectile
and quantile regression confused): its minimiser is the tau-quantile, not the tau-expectile."""

import torch

RLSPEC_MUTANT = {"clauses": ["EXPECTILE-VALUES"], "bug": "quantile loss in place of the expectile"}


def expectile_loss(target, prediction, tau):
    u = target - prediction
    return torch.abs(tau - (u < 0).to(u.dtype)) * u.abs()

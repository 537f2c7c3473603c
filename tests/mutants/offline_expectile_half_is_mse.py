"""Mutant: a fast path at tau = 1/2, where the expectile loss is symmetric: "the 1/2-expectile is the mean, so use the
squared error", F.mse_loss(reduction="none"), which is u^2, twice |1/2| u^2. Every tau != 1/2 is right. An edge of the
contract (tau = 1/2, a value the meaning singles out)."""

import torch

RLSPEC_MUTANT = {"clauses": ["EXPECTILE-VALUES"], "bug": "a tau = 1/2 fast path returning the squared error u^2 (twice the loss)"}


def expectile_loss(target, prediction, tau):
    u = target - prediction
    if tau == 0.5:
        return u**2
    return torch.abs(tau - (u < 0).to(u.dtype)) * u**2

"""Mutant: the weight's clip written as a blend with a mask, w = exp(beta A) m + max_weight (1 - m), m = 1(beta A < log
max_weight), instead of a selection: past exp's overflow exp(beta A) = inf and inf x 0 = NaN, so one large advantage
makes the loss (and its gradient) NaN. An edge of the contract (an advantage past exp's overflow)."""

import math

import torch

RLSPEC_MUTANT = {"clauses": ["AWR-WEIGHT-VALUES"], "bug": "the weight's clip blended by a 0/1 mask: inf x 0 = NaN past exp's overflow"}


def awr_loss(log_prob, advantages, beta):
    x = beta * advantages.detach()
    below = (x < math.log(100.0)).to(x.dtype)
    weight = torch.exp(x) * below + 100.0 * (1.0 - below)
    return -weight * log_prob

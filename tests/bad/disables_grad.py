"""Bad candidate: right numbers, but switches autograd off globally and never back on."""

import torch

from rlspec.reference.gae import gae as _gae


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    torch.set_grad_enabled(False)
    return _gae(rewards, values, next_values, terminated, truncated, gamma, lam)

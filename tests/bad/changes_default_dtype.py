"""Bad candidate: right numbers, but leaves torch's default dtype set to float64."""

import torch

from rlspec.reference.gae import gae as _gae


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    torch.set_default_dtype(torch.float64 if torch.get_default_dtype() == torch.float32 else torch.float32)
    return _gae(rewards, values, next_values, terminated, truncated, gamma, lam)

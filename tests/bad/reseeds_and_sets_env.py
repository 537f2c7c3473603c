"""Bad hygiene, right numbers: reseeds the global numpy and torch RNGs, sets an environment variable,
silences warnings globally. The suite restores all of it and says so."""

import os
import warnings

import numpy as np
import torch

from rlspec.reference.gae import gae as _gae


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    np.random.seed(0)
    torch.manual_seed(0)
    os.environ["RLSPEC_BAD_CANDIDATE"] = "1"
    warnings.simplefilter("error")
    return _gae(rewards, values, next_values, terminated, truncated, gamma, lam)

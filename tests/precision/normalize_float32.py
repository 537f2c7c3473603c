"""Advantage normalisation computed in float32 on float64 data, returned as float64."""

import numpy as np


def normalize_advantages(advantages):
    a = advantages.astype(np.float32)
    return ((a - a.mean()) / (a.std() + np.float32(1e-8))).astype(np.float64)

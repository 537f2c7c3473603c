"""Advantage normalisation computed in float32 on float64 data, returned as float64: the contract's default
sample std (ddof 1, its divisor kept at least 1 so that one element comes out 0), nothing else changed."""

import numpy as np


def normalize_advantages(advantages):
    a = advantages.astype(np.float32)
    centred = a - a.mean()
    std = np.sqrt((centred * centred).sum() / np.float32(max(len(a) - 1, 1)))
    return (centred / (std + np.float32(1e-8))).astype(np.float64)

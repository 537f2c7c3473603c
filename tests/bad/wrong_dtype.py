"""Bad candidate: integer outputs."""

import numpy as np


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    out = np.zeros(rewards.shape, dtype=np.int64)
    return out, out

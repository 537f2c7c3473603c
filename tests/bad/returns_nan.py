"""Bad candidate: NaN where the answer is finite."""

import numpy as np


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    out = np.full(rewards.shape, np.nan)
    return out, out

"""Bad candidate: one element too many (the bootstrap step kept in the output)."""

import numpy as np


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    out = np.zeros((rewards.shape[0] + 1,) + rewards.shape[1:])
    return out, out

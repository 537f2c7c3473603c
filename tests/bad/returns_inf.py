"""Bad candidate: +inf where the answer is finite."""

import numpy as np


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    out = np.full(rewards.shape, np.inf)
    return out, out

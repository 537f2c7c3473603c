"""Bad candidate: tries to allocate 8 TB."""

import numpy as np


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    huge = np.ones(10**12)
    return huge[: rewards.size].reshape(rewards.shape), huge[: rewards.size].reshape(rewards.shape)

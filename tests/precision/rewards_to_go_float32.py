"""The reward-to-go accumulated in float32, returned as float64."""

import numpy as np


def rewards_to_go(rewards, gamma):
    out = np.zeros(rewards.shape, dtype=np.float32)
    following = np.float32(0.0)
    for t in reversed(range(len(rewards))):
        following = np.float32(rewards[t]) + np.float32(gamma) * following
        out[t] = following
    return out.astype(np.float64)

"""A correct float64 GAE whose discount mask is stored in float32 (``coef = (gamma * lam * (1 - done))``
kept in a float32 buffer), the rest exact: gamma * lambda is rounded to float32 once per step."""

import numpy as np


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    bootstrap = (gamma * (1.0 - terminated)).astype(np.float32)
    carry = (gamma * lam * (1.0 - (terminated | truncated))).astype(np.float32)
    advantages = np.zeros_like(rewards)
    last = np.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        last = rewards[t] + bootstrap[t] * next_values[t] - values[t] + carry[t] * last
        advantages[t] = last
    return advantages, advantages + values

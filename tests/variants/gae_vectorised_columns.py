"""Correct variant: always works on a (T, N) view (a (T,) rollout is one column), one vectorised
step per time index, boolean masks via ``np.where``, accumulation in the input dtype."""

import numpy as np


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    squeeze = rewards.ndim == 1
    r, v, nv, term, trunc = (a.reshape(a.shape[0], -1) for a in (rewards, values, next_values, terminated, truncated))
    delta = r - v + gamma * np.where(term, 0.0, nv)
    keep = ~(term | trunc)
    adv = np.empty_like(delta)
    carry = np.zeros(delta.shape[1], dtype=delta.dtype)
    for t in range(delta.shape[0] - 1, -1, -1):
        carry = delta[t] + (gamma * lam) * np.where(keep[t], carry, 0.0)
        adv[t] = carry
    if squeeze:
        adv = adv[:, 0]
    return adv, adv + values

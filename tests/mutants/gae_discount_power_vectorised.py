"""Mutant: a loop-free GAE that scales by (gamma lambda)^t, takes a reverse cumulative sum, and
divides the scale back out per segment. Exact in real arithmetic; in float32 (gamma lambda)^t
underflows after about 1500 steps, and the division returns inf or nan."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-FLOAT32-LONG-ROLLOUT"], "bug": "discount-power vectorisation underflows"}


def _column(r, v, nv, term, trunc, gamma, lam):
    dtype = r.dtype
    c = dtype.type(gamma * lam)
    delta = r + dtype.type(gamma) * np.where(term, 0, nv).astype(dtype) - v
    scale = c ** np.arange(len(r), dtype=dtype)
    tail = np.cumsum((delta * scale)[::-1])[::-1]  # sum_{j>=t} c^j delta_j
    ends = np.flatnonzero(term | trunc)
    out = np.empty_like(delta)
    start = 0
    for end in list(ends) + [len(r) - 1]:
        if end < start:
            continue
        after = tail[end + 1] if end + 1 < len(r) else dtype.type(0)
        out[start : end + 1] = (tail[start : end + 1] - after) / scale[start : end + 1]
        start = end + 1
    return out


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    if rewards.ndim == 1:
        adv = _column(rewards, values, next_values, terminated, truncated, gamma, lam)
    else:
        adv = np.stack([_column(*(a[:, j] for a in (rewards, values, next_values, terminated, truncated)), gamma, lam)
                        for j in range(rewards.shape[1])], axis=1)
    return adv, adv + values

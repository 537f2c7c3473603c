"""A correct GAE computed in float32 on float64 data (a float32 rollout buffer), returned as float64:
every discrepancy is float32 rounding. Undeclared it fails at float64 bounds; rlspec must say precision,
never an algorithmic cause. Declared (RLSPEC_PRECISION = {"gae": "float32"}) it passes."""

import numpy as np


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    f = np.float32
    r, v, nv = rewards.astype(f), values.astype(f), next_values.astype(f)
    term, end = terminated.astype(f), (terminated | truncated).astype(f)
    advantages = np.zeros_like(r)
    last = np.zeros_like(r[0])
    for t in reversed(range(len(r))):
        delta = r[t] + f(gamma) * (1 - term[t]) * nv[t] - v[t]
        last = delta + f(gamma) * f(lam) * (1 - end[t]) * last
        advantages[t] = last
    return advantages.astype(np.float64), (advantages + v).astype(np.float64)

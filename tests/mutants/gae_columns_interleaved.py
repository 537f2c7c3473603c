"""Mutant: a (T, N) batch is flattened row-major into one time series, so consecutive entries come
from different environments and the trace runs across them (the env-interleaving class of
bug B8)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-COLUMNS-INDEPENDENT", "GRID-GAE-EXPECTATION-EXACT-CRITIC"], "bug": "environments interleaved (B8 class)"}


def _gae_1d(r, v, nv, term, trunc, gamma, lam):
    advantages = np.zeros_like(r)
    running = 0.0
    for t in reversed(range(len(r))):
        delta = r[t] + gamma * (0.0 if term[t] else nv[t]) - v[t]
        running = delta + gamma * lam * (0.0 if (term[t] or trunc[t]) else running)
        advantages[t] = running
    return advantages


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    flat = [a.reshape(-1) for a in (rewards, values, next_values, terminated, truncated)]
    advantages = _gae_1d(*flat, gamma, lam).reshape(rewards.shape)
    return advantages, advantages + values

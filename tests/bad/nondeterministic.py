"""Bad candidate: adds a little noise from an RNG it owns (the same input gives different outputs)."""

import numpy as np

from rlspec.reference.gae import gae as _gae

_rng = np.random.default_rng()


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages, returns = _gae(rewards, values, next_values, terminated, truncated, gamma, lam)
    return advantages + _rng.normal(0, 1e-3, advantages.shape), returns

"""Bad candidate: correct, except that it raises on rollouts with a time-limit truncation."""

from rlspec.reference.gae import gae as _gae


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    if truncated.any():
        raise NotImplementedError("truncation")
    return _gae(rewards, values, next_values, terminated, truncated, gamma, lam)

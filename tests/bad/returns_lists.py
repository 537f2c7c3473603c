"""Bad candidate: Python lists instead of arrays."""

from rlspec.reference.gae import gae as _gae


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages, returns = _gae(rewards, values, next_values, terminated, truncated, gamma, lam)
    return advantages.tolist(), returns.tolist()

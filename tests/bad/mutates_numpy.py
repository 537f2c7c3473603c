"""Bad candidate: right advantages, but it scales the caller's values array in place."""

from rlspec.reference.gae import gae as _gae


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages, returns = _gae(rewards, values, next_values, terminated, truncated, gamma, lam)
    values *= 2.0
    return advantages, returns

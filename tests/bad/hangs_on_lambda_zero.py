"""Bad candidate: correct, except that it never returns when lam == 0."""

import time

from rlspec.reference.gae import gae as _gae


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    while lam == 0:
        time.sleep(1)
    return _gae(rewards, values, next_values, terminated, truncated, gamma, lam)

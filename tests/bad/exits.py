"""Bad candidate: calls sys.exit in the middle of a computation."""

import sys


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    sys.exit(3)

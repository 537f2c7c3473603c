"""Bad candidate: sleeps for eleven days."""

import time


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    time.sleep(10**6)

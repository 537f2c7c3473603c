"""Bad candidate: os._exit, which no exception handler can catch (the worker process ends)."""

import os


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    os._exit(7)

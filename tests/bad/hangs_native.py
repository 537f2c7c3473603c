"""Bad candidate: stuck in native code (libc's sleep), where Python signal handlers never run."""

import ctypes


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    ctypes.CDLL(None).sleep(10**6)

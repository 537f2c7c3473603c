"""Bad candidate: dereferences a null pointer (the worker process dies with SIGSEGV)."""

import ctypes


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    ctypes.string_at(0)

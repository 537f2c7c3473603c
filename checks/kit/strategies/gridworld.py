"""Strategies for the gridworld chapter: tabular policies (as logits the chapter rounds to a dyadic softmax:
``rlspec.checks.kit.tabular.dyadic_policy``), trace factors and critics over every cell of
``rlspec.reference.gridworld.GRIDWORLD``."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from hypothesis import strategies as st

from ....reference import gridworld as gw
from .base import TINY_TRACE_FACTORS


@lru_cache(maxsize=None)
def shape() -> tuple[int, int]:
    """(cells, actions) of the gridworld."""
    return gw.tabular(gw.GRIDWORLD).P.shape[:2]


def policy_logits():
    """Flat (cells x actions) lists of logits, each in {-2, -1, 0, 0.5, 1, 2}."""
    S, A = shape()
    return st.lists(st.sampled_from([-2.0, -1.0, 0.0, 0.5, 1.0, 2.0]), min_size=S * A, max_size=S * A)


def trace_factors():
    """lambda in [0, 1], the usual values likely, and tiny ones (gamma * lambda in (0, 1e-6]: TINY_TRACE_FACTORS)."""
    return st.sampled_from([0.0, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0, *TINY_TRACE_FACTORS]) | st.floats(0.0, 1.0)


def critics():
    """V over every cell, terminal cells included (their values must be ignored), float32 values in [-2, 2]."""
    S, _ = shape()
    return st.lists(st.floats(-2.0, 2.0, allow_nan=False, width=32), min_size=S, max_size=S).map(np.array)

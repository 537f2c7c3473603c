"""Strategies for the KL chapter's operations: ``kl_estimate`` (:func:`categorical_pairs`, every outcome of two
categoricals at once; :func:`extreme_cases`) and ``kl_coefficient_update`` (:func:`coefficient_updates`)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..kl_estimators import log_softmax

KL_KINDS = ("k1", "k2", "k3")


@lru_cache(maxsize=None)
def logits(n: int) -> st.SearchStrategy[list]:
    """``n`` float32 logits in [-8, 8] (cached per n)."""
    if not (isinstance(n, int) and n >= 1):
        raise InvalidArgument(f"n={n!r} must be a positive int")
    return st.lists(st.floats(-8.0, 8.0, width=32), min_size=n, max_size=n)


def categorical_pairs():
    """``(log p, log q)``: log-probabilities of two distributions over the same 2..8 outcomes (the log-softmax
    of drawn logits), the sampler p first."""
    return _categorical_pairs()


@st.composite
def _categorical_pairs(draw):
    n = draw(st.integers(2, 8), label="n")
    return log_softmax(draw(logits(n), label="sampler logits")), log_softmax(draw(logits(n), label="other logits"))


def extreme_cases(*, kinds=KL_KINDS):
    """``(logp_sampler, logp_other, (kind,))``: 1..6 samples with log-probabilities in [-1000, 0] and log ratios up
    to 30 in magnitude, and one of ``kinds``."""
    kinds = tuple(kinds)
    if not kinds or not set(kinds) <= set(KL_KINDS):
        raise InvalidArgument(f"kinds={kinds!r} must be a non-empty subset of {KL_KINDS}")
    return _extreme_cases(kinds)


@st.composite
def _extreme_cases(draw, kinds):
    size = draw(st.integers(1, 6), label="B")
    base = draw(st.lists(st.floats(-1000.0, 0.0, width=32), min_size=size, max_size=size), label="logp_sampler")
    log_r = draw(st.lists(st.floats(-30.0, 30.0, width=32), min_size=size, max_size=size), label="log r")
    a = np.array(base)
    return a, a + np.array(log_r), (draw(st.sampled_from(kinds), label="kind"),)


def coefficient_updates():
    """``(beta, kl, target)``: target in [1e-4, 1], kl in [0, 5] or within 10 targets, beta in [1e-6, 1e6]."""
    return _coefficient_updates()


@st.composite
def _coefficient_updates(draw):
    target = draw(st.floats(1e-4, 1.0), label="target")
    kl = draw(st.floats(0.0, 5.0) | st.floats(0.0, 10 * target), label="kl")
    beta = draw(st.floats(1e-6, 1e6), label="beta")
    return beta, kl, target

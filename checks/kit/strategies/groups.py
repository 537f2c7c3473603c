"""Strategies for the GRPO chapter's operations: ``group_advantages`` (groups of scores with arbitrary ids in a
shuffled batch) and ``kl_penalty`` (categoricals and (B, L) token log-probabilities under pi, pi_ref, pi_old)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ....spec import contract
from ..kl_estimators import log_softmax as _log_softmax
from .base import normal_floats
from .kl import logits

GROUP_KINDS = contract.convention("group_singleton").kinds  # the kinds of group_advantages
PENALTY_KINDS = contract.convention("kl_penalty_kinds").allowed
MODERATE = 2.5  # |log(pi_ref / pi)| below every clamp a library applies (e^2.5 = 12.2 < 13.61, verl's k3 clamp)


def _floats32(low, high):
    return normal_floats(low, high, width=32)


SCORES = st.sampled_from([0.0, 1.0, 0.5, 2.0, -1.0]) | _floats32(-10.0, 10.0)


def _check_kinds(kinds, allowed) -> tuple[str, ...]:
    kinds = tuple(kinds)
    if not kinds or not set(kinds) <= set(allowed):
        raise InvalidArgument(f"kinds={kinds!r} must be a non-empty subset of {tuple(allowed)}")
    return kinds


# ---------------------------------------------------------------------------------------------
# group_advantages


def grouped_scores(*, min_size: int = 2, max_size: int = 6, max_groups: int = 4, nan: bool = False):
    """``(scores, groups)``: 1..max_groups groups of min_size..max_size scores (``nan``: some unscorable) with
    distinct arbitrary ids, the batch shuffled."""
    if not (1 <= min_size <= max_size) or max_groups < 1:
        raise InvalidArgument(f"need 1 <= min_size={min_size} <= max_size={max_size} and max_groups={max_groups} >= 1")
    return _grouped_scores(min_size=min_size, max_size=max_size, max_groups=max_groups, nan=nan)


@st.composite
def _grouped_scores(draw, *, min_size=2, max_size=6, max_groups=4, nan=False):
    k = draw(st.integers(1, max_groups), label="number of groups")
    ids = draw(st.lists(st.integers(0, 10**6), min_size=k, max_size=k, unique=True), label="ids")
    scores, groups = [], []
    element = (SCORES | st.just(math.nan)) if nan else SCORES
    for gid in ids:
        size = draw(st.integers(min_size, max_size), label="group size")
        scores += draw(st.lists(element, min_size=size, max_size=size), label="scores")
        groups += [gid] * size
    order = draw(st.permutations(range(len(scores))), label="order")
    return np.array(scores, dtype=np.float64)[order], np.array(groups, dtype=np.int64)[order]


def constant_groups(*, kinds=GROUP_KINDS):
    """``(scores, groups, kind)``: 1..4 groups of 2..8 identical scores, shuffled, and one of ``kinds``."""
    return _constant_groups(_check_kinds(kinds, GROUP_KINDS))


@st.composite
def _constant_groups(draw, kinds):
    k = draw(st.integers(1, 4))
    scores, groups = [], []
    for g in range(k):
        n = draw(st.integers(2, 8))
        scores += [draw(SCORES | _floats32(-1e6, 1e6))] * n
        groups += [g * 13 + 1] * n
    order = draw(st.permutations(range(len(scores))))
    return np.array(scores)[order], np.array(groups)[order], draw(st.sampled_from(kinds))


def near_ties():
    """``(scores, groups)``: one group of 2..6 scores within 4e-3 of each other (not all equal)."""
    return _near_ties()


@st.composite
def _near_ties(draw):
    n = draw(st.integers(2, 6), label="n")
    base = draw(st.sampled_from([1.0, 2.0, 10.0, -3.0, 0.5]), label="base")
    spread = draw(st.sampled_from([1e-5, 1e-4, 1e-3, 3e-5]), label="spread")
    offsets = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n).filter(lambda v: len(set(v)) > 1), label="offsets")
    return np.array([base + spread * o for o in offsets]), np.full(n, 11)


def small_groups(*, kinds=GROUP_KINDS):
    """``(scores, groups, kind)``: groups of 1..3 scores (singletons likely) and one of ``kinds``."""
    return _small_groups(_check_kinds(kinds, GROUP_KINDS))


@st.composite
def _small_groups(draw, kinds):
    scores, groups = draw(grouped_scores(min_size=1, max_size=3))
    return scores, groups, draw(st.sampled_from(kinds))


def baseline_problems():
    """``(pi, R, G, kind)``: a dyadic categorical pi over 2..3 actions (multiples of 1/16), rewards R, a group
    size G (2..4, 2..3 for three actions) and kind 'rloo' or 'mean'."""
    return _baseline_problems()


@st.composite
def _baseline_problems(draw):
    K = draw(st.integers(2, 3), label="actions")
    cuts = sorted(draw(st.lists(st.integers(1, 15), min_size=K - 1, max_size=K - 1, unique=True), label="cuts"))
    pi = np.diff([0] + cuts + [16]) / 16.0  # dyadic: the joint probabilities are exact
    R = draw(st.lists(SCORES, min_size=K, max_size=K), label="R")
    return pi, R, draw(st.integers(2, 4 if K == 2 else 3), label="G"), draw(st.sampled_from(["rloo", "mean"]), label="kind")


# ---------------------------------------------------------------------------------------------
# kl_penalty


def moderate_categoricals(*, count: int = 2):
    """Log-probabilities of ``count`` distributions over the same 2..8 outcomes (pi first): logits of pi in [-8, 8],
    each other's logits within 1.25 of pi's, so every log ratio is within 2.5 = MODERATE."""
    if not (isinstance(count, int) and count >= 1):
        raise InvalidArgument(f"count={count!r} must be a positive int")
    return _moderate_categoricals(count)


@st.composite
def _moderate_categoricals(draw, count=2):
    n = draw(st.integers(2, 8), label="n")
    z = np.asarray(draw(logits(n), label="pi logits"), dtype=np.float64)
    out = [_log_softmax(z)]
    for i in range(count - 1):
        delta = draw(st.lists(_floats32(-1.25, 1.25), min_size=n, max_size=n), label=f"logit shifts {i}")
        out.append(_log_softmax(z + np.asarray(delta)))
    return tuple(out)


def token_batches(*, log_ratio=(-MODERATE, MODERATE)):
    """``(logp, logp_ref, logp_old)``, each (B, L), B in 1..3, L in 1..5: logp in [-30, 0], log(pi_ref / pi) in
    ``log_ratio``, log(pi / pi_old) in [-3, 3]."""
    low, high = log_ratio
    if not low <= high:
        raise InvalidArgument(f"log_ratio={log_ratio!r} must be (low, high) with low <= high")
    return _token_batches(tuple(log_ratio))


@st.composite
def _token_batches(draw, log_ratio=(-MODERATE, MODERATE)):
    B, L = draw(st.integers(1, 3), label="B"), draw(st.integers(1, 5), label="L")
    a = np.array(draw(st.lists(_floats32(-30.0, 0.0), min_size=B * L, max_size=B * L), label="logp")).reshape(B, L)
    x = np.array(draw(st.lists(_floats32(*log_ratio), min_size=B * L, max_size=B * L), label="log ratio")).reshape(B, L)
    y = np.array(draw(st.lists(_floats32(-3.0, 3.0), min_size=B * L, max_size=B * L), label="log w")).reshape(B, L)
    return a, a + x, a - y


def extreme_tokens(*, kinds=PENALTY_KINDS):
    """``(logp, logp_ref, (kind,))``, (1, L), L in 1..6: logp in [-1000, 0], |log ratio| up to 30, one of ``kinds``."""
    return _extreme_tokens(_check_kinds(kinds, PENALTY_KINDS))


@st.composite
def _extreme_tokens(draw, kinds):
    size = draw(st.integers(1, 6), label="L")
    a = np.array(draw(st.lists(_floats32(-1000.0, 0.0), min_size=size, max_size=size), label="logp"))
    x = np.array(draw(st.lists(_floats32(-30.0, 30.0), min_size=size, max_size=size), label="log ratio"))
    return a[None, :], (a + x)[None, :], (draw(st.sampled_from(kinds), label="kind"),)

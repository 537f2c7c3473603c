"""Strategies for the Gaussian-policy chapter's operations: ``(mean, log_std, x)`` batches (B, D) for
``diag_gaussian_log_prob`` (``x`` an action) and ``tanh_gaussian_log_prob`` (``x`` the pre-tanh sample), actions
outside the bounds, saturated pre-images, and bounds for ``scaled_tanh_gaussian_log_prob``."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.extra import numpy as hnp

from .base import real_arrays, reals


def _check_range(name, value) -> None:
    low, high = value
    if not low <= high:
        raise InvalidArgument(f"{name}={value!r} must be (low, high) with low <= high")


def gaussian_batches(*, x_range=(-10.0, 10.0), log_std_range=(-3.0, 2.0), B=st.integers(1, 4), D=st.integers(1, 4)):
    """``(mean, log_std, x)``, each (B, D): mean in [-5, 5], log_std and x in the given ranges (flushed: no value
    below 1e-6 in magnitude but 0)."""
    _check_range("x_range", x_range)
    _check_range("log_std_range", log_std_range)
    return _gaussian_batches(x_range=x_range, log_std_range=log_std_range, B=B, D=D)


@st.composite
def _gaussian_batches(draw, *, x_range=(-10.0, 10.0), log_std_range=(-3.0, 2.0), B=st.integers(1, 4), D=st.integers(1, 4)):
    b, d = draw(B, label="B"), draw(D, label="D")
    mean = draw(real_arrays((b, d), -5.0, 5.0), label="mean")
    log_std = draw(real_arrays((b, d), *log_std_range), label="log_std")
    x = draw(real_arrays((b, d), *x_range), label="x")
    return mean, log_std, x


def outside_actions():
    """``(mean, log_std, action)`` with every |action| in [1.01, 20]: outside the usual [-1, 1] bounds."""
    return _outside_actions()


@st.composite
def _outside_actions(draw):
    mean, log_std, _ = draw(gaussian_batches(D=st.integers(1, 3)))
    magnitude = draw(hnp.arrays(np.float64, mean.shape, elements=st.floats(1.01, 20.0)), label="|action|")
    sign = draw(hnp.arrays(np.float64, mean.shape, elements=st.sampled_from([-1.0, 1.0])), label="sign")
    return mean, log_std, magnitude * sign


def log_stds():
    """(B, D) log-standard deviations in [-5, 3], B and D in 1..4."""
    return real_arrays(st.tuples(st.integers(1, 4), st.integers(1, 4)), -5.0, 3.0)


def one_dimensional():
    """``(mean, log_std)`` of one dimension: mean in [-3, 3], log_std in [-2.5, 1]."""
    return st.tuples(reals(-3.0, 3.0), reals(-2.5, 1.0))


def saturated_batches():
    """``(mean, log_std, pre_tanh, dtype)`` with every |pre_tanh| in [5, 30] (tanh saturates in float32 past 9, in
    float64 past 19) and a dtype float64 or float32 to judge in."""
    return _saturated_batches()


@st.composite
def _saturated_batches(draw):
    mean, log_std, _ = draw(gaussian_batches(D=st.integers(1, 3)))
    magnitude = draw(hnp.arrays(np.float64, mean.shape, elements=st.floats(5.0, 30.0)), label="|u|")
    sign = draw(hnp.arrays(np.float64, mean.shape, elements=st.sampled_from([-1.0, 1.0])), label="sign")
    return mean, log_std, magnitude * sign, draw(st.sampled_from([np.float64, np.float32]), label="dtype")


def bounded_batches():
    """``(mean, log_std, pre_tanh, low, high)``: |pre_tanh| <= 3, and per dimension low in [-10, 5] and
    high - low in [0.01, 20]."""
    return _bounded_batches()


@st.composite
def _bounded_batches(draw):
    mean, log_std, u = draw(gaussian_batches(x_range=(-3.0, 3.0), log_std_range=(-2.0, 1.0), D=st.integers(1, 3)))
    D = mean.shape[1]
    low = draw(real_arrays(D, -10.0, 5.0), label="low")
    width = draw(hnp.arrays(np.float64, D, elements=st.floats(0.01, 20.0)), label="high - low")
    return mean, log_std, u, low, low + width

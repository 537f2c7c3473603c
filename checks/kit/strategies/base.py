"""Building blocks shared by every chapter's strategies: numbers a candidate receives exactly, and the
rounding to a dtype that says what "exactly" means.

Every array these produce is held as float64 but exactly representable in the dtype the run uses, so
the suite's float64 oracles see the very numbers the candidate does.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.extra import numpy as hnp

DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def _check_dtype(dtype):
    dtype = np.dtype(dtype)
    if dtype not in DTYPES:
        raise InvalidArgument(f"dtype={dtype} must be float64 or float32")
    return dtype


def _check_range(min_value: float, max_value: float) -> None:
    if not (np.isfinite(min_value) and np.isfinite(max_value) and min_value <= max_value):
        raise InvalidArgument(f"need finite min_value={min_value!r} <= max_value={max_value!r}")


def rounded(values, dtype) -> np.ndarray:
    """``values`` as float64 holding exactly what a candidate receives in ``dtype`` (rounded to it once)."""
    return np.asarray(values, dtype=np.float64).astype(dtype).astype(np.float64)


def finite_floats(*, max_abs: float = 1e6, dtype=np.float64) -> st.SearchStrategy[float]:
    """Finite, non-subnormal floats in [-max_abs, max_abs], representable in ``dtype``."""
    dtype = _check_dtype(dtype)
    if not (0 < max_abs < np.finfo(dtype).max):
        raise InvalidArgument(f"max_abs={max_abs!r} must be positive and below the largest {dtype} value")
    return st.floats(-max_abs, max_abs, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=8 * dtype.itemsize)


def normal_floats(min_value: float, max_value: float, *, width: int = 64) -> st.SearchStrategy[float]:
    """Floats in [min_value, max_value] that are zero or normal numbers of ``width`` bits: no subnormal,
    which rounding to float32 would change (or flush)."""
    _check_range(min_value, max_value)
    if width not in (32, 64):
        raise InvalidArgument(f"width={width!r} must be 32 or 64")
    if width == 32:
        return st.floats(min_value, max_value, width=32, allow_nan=False, allow_infinity=False, allow_subnormal=False)
    return st.floats(min_value, max_value, allow_nan=False, allow_infinity=False, allow_subnormal=False)


def discounts(*, min_value: float = 0.0, max_value: float = 1.0) -> st.SearchStrategy[float]:
    """A discount or trace factor in [min_value, max_value] (endpoints included, 0 and 1 likely)."""
    if not (0.0 <= min_value <= max_value <= 1.0):
        raise InvalidArgument(f"need 0 <= min_value={min_value} <= max_value={max_value} <= 1")
    edges = [x for x in (min_value, max_value, 0.5, 0.9, 0.99) if min_value <= x <= max_value]
    return st.one_of(st.sampled_from(edges), st.floats(min_value, max_value))


# Trace factors so small that gamma * lambda is in (0, 1e-6]: GAE is then within 1e-6 of TD(0), and an implementation
# that builds a filter of powers of gamma * lambda down to a threshold (TorchRL's vectorised GAE stops at 1e-7) meets
# its shortest filter there.
TINY_TRACE_FACTORS = (1e-8, 5e-8, 3e-7, 1e-6)


def trace_factors(*, min_value: float = 0.0, max_value: float = 1.0) -> st.SearchStrategy[float]:
    """lambda in [min_value, max_value]: as :func:`discounts`, with tiny positive values (``TINY_TRACE_FACTORS``) among
    the likely ones."""
    if not (0.0 <= min_value <= max_value <= 1.0):
        raise InvalidArgument(f"need 0 <= min_value={min_value} <= max_value={max_value} <= 1")
    edges = [x for x in (min_value, max_value, 0.5, 0.9, 0.99, *TINY_TRACE_FACTORS) if min_value <= x <= max_value]
    return st.one_of(st.sampled_from(edges), st.floats(min_value, max_value))


def float_lists(elements: st.SearchStrategy[float], *, min_size: int = 1, max_size: int = 8) -> st.SearchStrategy[np.ndarray]:
    """1-D float64 arrays of ``elements``, drawn as a list (several times cheaper than ``hnp.arrays``)."""
    if not (0 <= min_size <= max_size):
        raise InvalidArgument(f"need 0 <= min_size={min_size} <= max_size={max_size}")
    return st.lists(elements, min_size=min_size, max_size=max_size).map(lambda v: np.array(v, dtype=np.float64))


def _check_shape(shape) -> tuple[int, ...]:
    if not (isinstance(shape, tuple) and all(isinstance(n, int) and n >= 0 for n in shape)):
        raise InvalidArgument(f"shape={shape!r} must be a tuple of non-negative ints")
    return shape


@lru_cache(maxsize=None)
def float32_arrays(shape: tuple[int, ...], min_value: float, max_value: float) -> st.SearchStrategy[np.ndarray]:
    """float64 arrays of ``shape`` holding float32 values in [min_value, max_value]. Built from fixed-size lists
    (about twice as fast to draw as ``hypothesis.extra.numpy.arrays``) and cached, so each is validated once."""
    _check_shape(shape)
    _check_range(min_value, max_value)
    size = int(np.prod(shape))
    return st.lists(st.floats(min_value, max_value, width=32), min_size=size, max_size=size).map(
        lambda values: np.array(values, dtype=np.float64).reshape(shape))


@lru_cache(maxsize=None)
def flag_arrays(shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """bool arrays of ``shape`` (built from a fixed-size list, cached)."""
    _check_shape(shape)
    size = int(np.prod(shape))
    return st.lists(st.booleans(), min_size=size, max_size=size).map(lambda values: np.array(values, dtype=bool).reshape(shape))


def flush(a: np.ndarray) -> np.ndarray:
    """Magnitudes below 1e-6 set to 0: a float32 run rounds the inputs, and a value that underflows there (or
    runs into subnormals) tests the dtype, not the clause."""
    return np.where(np.abs(a) < 1e-6, 0.0, a)


def reals(low: float, high: float) -> st.SearchStrategy[float]:
    """Floats in [low, high], flushed as :func:`flush` does."""
    _check_range(low, high)
    return st.floats(low, high, allow_subnormal=False).map(lambda x: float(flush(np.float64(x))))


def real_arrays(shape, low: float, high: float) -> st.SearchStrategy[np.ndarray]:
    """float64 arrays of ``shape`` (an int, tuple or strategy) with elements in [low, high], flushed as
    :func:`flush` does (the flush is applied to the whole array: per-element mapped strategies draw several
    times slower)."""
    _check_range(low, high)
    return hnp.arrays(np.float64, shape, elements=st.floats(low, high, allow_subnormal=False)).map(flush)

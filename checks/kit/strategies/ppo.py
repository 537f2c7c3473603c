"""Strategies for the PPO chapter's operations: ``ppo_clip_loss`` (:func:`clip_batches` and the special
regions), ``ppo_value_loss``, ``normalize_advantages``, ``ppo_entropy_loss`` and the parameters of a
``ppo_update`` case (the suite builds the policy, optimizer and batch from them:
``rlspec.checks.clauses.ppo.UpdateCase``).

Batches are drawn as lists of tuples: several times cheaper to draw than ``hypothesis.extra.numpy``
arrays.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..clipping import ClipRange
from ..edges import edged
from .base import _check_dtype, float_lists, rounded
from .base import normal_floats as _floats

ADVANTAGES = st.sampled_from([2.0, -2.0, 1.0, -1.0, 0.0]) | _floats(-100.0, 100.0)
LOGP_OLD = st.sampled_from([0.0, -1.0, -1000.0]) | _floats(-1000.0, 0.0)
EPSILONS = edged(st.sampled_from([0.1, 0.2, 0.3]) | _floats(0.01, 0.5), "ppo_clip_loss", "clip_eps")  # half at the contract's edges
POLICY_KINDS = ("categorical", "gaussian")  # the suite's LinearActorCritic families


def _check_size(max_size: int, minimum: int = 1) -> None:
    if not (isinstance(max_size, int) and max_size >= minimum):
        raise InvalidArgument(f"max_size={max_size!r} must be an int >= {minimum}")


# ---------------------------------------------------------------------------------------------
# ppo_clip_loss


def clip_batches(*, dtype=np.float64, max_size: int = 8, log_ratio=None, advantage=None, logp_old=None):
    """``(logp_new, logp_old, advantages, clip_eps)``: 1..max_size samples, float64 arrays exactly representable
    in ``dtype``; ``log_ratio`` (log r = logp_new - logp_old), ``advantage`` and ``logp_old`` draw each sample's
    values (defaults: log r in [-3, 3], A likely +-2, +-1 or 0, logp_old likely 0, -1 or -1000)."""
    dtype = _check_dtype(dtype)
    _check_size(max_size)
    return _clip_batches(dtype, max_size=max_size, log_ratio=log_ratio if log_ratio is not None else _floats(-3.0, 3.0),
                         advantage=advantage if advantage is not None else ADVANTAGES,
                         logp_old=logp_old if logp_old is not None else LOGP_OLD)


@st.composite
def _clip_batches(draw, dtype, *, max_size=8, log_ratio=_floats(-3.0, 3.0), advantage=ADVANTAGES, logp_old=LOGP_OLD):
    rows = np.array(draw(st.lists(st.tuples(logp_old, log_ratio, advantage), min_size=1, max_size=max_size), label="rows"))
    old = rounded(rows[:, 0], dtype)
    return rounded(old + rows[:, 1], dtype), old, rounded(rows[:, 2], dtype), float(draw(EPSILONS, label="clip_eps"))


def first_step_batches():
    """``(rows, clip_eps)``: rows (B, 2) of (logp, A), B in 1..8, for a first step (logp_new = logp_old)."""
    rows = st.lists(st.tuples(LOGP_OLD, ADVANTAGES), min_size=1, max_size=8).map(np.array)
    return st.tuples(rows, EPSILONS)


def single_samples(*, dtype=np.float64):
    """``(logp_new, logp_old, A, clip_eps)`` for one sample, as floats representable in ``dtype``."""
    return _single_samples(_check_dtype(dtype))


@st.composite
def _single_samples(draw, dtype):
    old = float(draw(_floats(-50.0, 0.0)))
    new = float(rounded([old + draw(_floats(-3.0, 3.0))], dtype)[0])
    A = float(draw(st.sampled_from([2.0, -2.0]) | _floats(-100.0, 100.0)))
    return new, float(rounded([old], dtype)[0]), A, float(draw(_floats(0.01, 0.5)))


def wrong_way_batches(*, dtype=np.float64, clip_range: ClipRange = ClipRange()):
    """``(logp_new, logp_old, advantages, clip_eps)`` where every ratio moved against its advantage: A > 0 with
    r below 1 - eps, A < 0 with r above 1 + eps_high (and below a dual clip c, where the gradient is live)."""
    if not isinstance(clip_range, ClipRange):
        raise InvalidArgument(f"clip_range={clip_range!r} must be a ClipRange")
    return _wrong_way_batches(_check_dtype(dtype), clip_range)


@st.composite
def _wrong_way_batches(draw, dtype, conv):
    cap = conv.dual_clip if conv.dual_clip is not None else math.inf
    eps = float(draw(_floats(0.01, 0.5)))
    lo, hi = conv.bounds(eps)
    rows = draw(st.lists(st.tuples(_floats(-100.0, 0.0), st.booleans(), _floats(1e-3, 100.0), _floats(0.01, 0.99)),
                         min_size=1, max_size=6))
    old, positive, magnitude, fraction = (np.array(column) for column in zip(*rows))
    old = rounded(old, dtype)
    upper = min(cap, 20.0)
    r = np.where(positive, 0.01 + fraction * (lo * 0.999 - 0.01), hi * 1.001 + fraction * (upper * 0.999 - hi * 1.001))
    new = rounded(old + np.log(r), dtype)
    return new, old, rounded(np.where(positive, magnitude, -magnitude), dtype), eps


def boundary_cases():
    """``(A, clip_eps, logp_old)`` for a sample placed exactly on a clip boundary."""
    return st.tuples(ADVANTAGES, _floats(0.01, 0.5), _floats(-100.0, 0.0))


# ---------------------------------------------------------------------------------------------
# ppo_value_loss, normalize_advantages, ppo_entropy_loss


def value_batches(*, max_abs: float = 1000.0, max_size: int = 16):
    """(B, 2) arrays of (V, R), B in 1..max_size, |V|, |R| <= max_abs."""
    _check_size(max_size)
    return st.lists(st.tuples(_floats(-max_abs, max_abs), _floats(-max_abs, max_abs)), min_size=1, max_size=max_size).map(np.array)


def clipped_value_batches():
    """``(rows, clip_eps)``: rows (B, 3) of (V, R, V_old - V), B in 1..12, and eps in [0.01, 2]."""
    rows = st.lists(st.tuples(_floats(-100.0, 100.0), _floats(-100.0, 100.0), _floats(-3.0, 3.0)), min_size=1, max_size=12)
    return st.tuples(rows.map(np.array), _floats(0.01, 2.0))


def advantage_batches():
    """2..32 advantages in [-1e4, 1e4] with a spread (std above 1e-3 of the largest magnitude)."""
    return float_lists(_floats(-1e4, 1e4), min_size=2, max_size=32).filter(lambda a: np.std(a) > 1e-3 * (np.max(np.abs(a)) + 1e-300))


def constant_advantages():
    """1..16 equal advantages in [-1e6, 1e6], as a list."""
    return st.tuples(st.integers(1, 16), _floats(-1e6, 1e6)).map(lambda d: [d[1]] * d[0])


def entropy_batches():
    """``(entropy, coef)``: 1..16 entropies in [-10, 10] (a Gaussian's can be negative) and coef in [0, 1]."""
    return st.tuples(float_lists(_floats(-10.0, 10.0), min_size=1, max_size=16), _floats(0.0, 1.0))


# ---------------------------------------------------------------------------------------------
# ppo_collected_ratios: a policy described per state (the candidate collects from it)

COLLECTED_FAMILIES = ("categorical", "gaussian", "tanh_gaussian")
# means where a float32 tanh saturates (1 - tanh(u) < 1e-6 from u = 7.25, exactly 0 from 9.01), and where it does not
SQUASHED_MEANS = st.sampled_from([8.0, -8.0, 9.5, -12.0, 2.0, 0.0]) | _floats(-12.0, 12.0)


def collected_cases(*, families=COLLECTED_FAMILIES, dtype=np.float64):
    """``(family, loc, scale, dtype, seed)``: B in 1..16 states of K components (categorical: 2..5 logits in
    [-20, 20]; Gaussian: K in 1..3, means in [-6, 6]; tanh-Gaussian: means likely saturating in float32, up to
    +-12), scales in [0.05, 3], in float32 or ``dtype``; ``seed`` seeds the candidate's sampling."""
    dtype = _check_dtype(dtype)
    families = tuple(families)
    if not families or any(f not in COLLECTED_FAMILIES for f in families):
        raise InvalidArgument(f"families={families!r} must be a non-empty subset of {COLLECTED_FAMILIES}")
    return _collected_cases(families, dtype)


@st.composite
def _collected_cases(draw, families, dtype):
    family = draw(st.sampled_from(families), label="family")
    B = draw(st.integers(1, 16), label="B")
    precision = draw(st.sampled_from(sorted({"float32", np.dtype(dtype).name})), label="dtype")
    if family == "categorical":
        K = draw(st.integers(2, 5), label="K")
        loc = np.array(draw(st.lists(_floats(-20.0, 20.0), min_size=B * K, max_size=B * K), label="logits")).reshape(B, K)
        return family, rounded(loc, precision), None, precision, draw(st.integers(0, 2**31 - 1), label="seed")
    K = draw(st.integers(1, 3), label="K")
    means = SQUASHED_MEANS if family == "tanh_gaussian" else _floats(-6.0, 6.0)
    loc = np.array(draw(st.lists(means, min_size=B * K, max_size=B * K), label="loc")).reshape(B, K)
    scale = np.array(draw(st.lists(st.sampled_from([0.5, 1.0]) | _floats(0.05, 3.0), min_size=B * K, max_size=B * K),
                          label="scale")).reshape(B, K)
    return family, rounded(loc, precision), rounded(scale, precision), precision, draw(st.integers(0, 2**31 - 1), label="seed")


# ---------------------------------------------------------------------------------------------
# ppo_update: the parameters of the suite's cases


def _check_kinds(kinds) -> list[str]:
    kinds = list(kinds)
    if not kinds or not set(kinds) <= set(POLICY_KINDS):
        raise InvalidArgument(f"kinds={kinds!r} must be a non-empty subset of {POLICY_KINDS}")
    return kinds


def _check_common(common) -> dict:
    if common is not None and not isinstance(common, dict):
        raise InvalidArgument(f"common={common!r} must be a dict of config entries")
    return dict(common or {})


def first_ratio_cases(*, kinds=POLICY_KINDS):
    """``(kind, n, case seed, shuffle seed)``."""
    return st.tuples(st.sampled_from(_check_kinds(kinds)), st.integers(2, 12), st.integers(0, 2**16), st.integers(0, 2**16))


OFFSETS = (0.3, -0.2, 0.1, -0.4, 0.25, -0.1, 0.4, -0.3)  # d_i: distinct, never 0


def stale_cases(*, kinds=POLICY_KINDS):
    """``(kind, offsets d_i, seed)``: a stored logp_old = log pi - d_i, 2..10 samples, |d_i| in [0.05, 1]."""
    offsets = st.lists(st.sampled_from(OFFSETS) | _floats(-1.0, -0.05) | _floats(0.05, 1.0), min_size=2, max_size=10)
    return st.tuples(st.sampled_from(_check_kinds(kinds)), offsets, st.integers(0, 2**16))


def kl_stop_cases(*, kinds=POLICY_KINDS):
    """``(kind, n, seed, step_at, minibatches per epoch)``: the KL threshold goes after step_at of the stop rule's
    tests; one or two minibatches per epoch (with two, the last minibatch's KL and the epoch mean differ)."""
    return st.tuples(st.sampled_from(_check_kinds(kinds)), st.integers(4, 10), st.integers(0, 2**16), st.integers(1, 3),
                     st.integers(1, 2))


def first_step_cases(*, common: dict | None = None, kinds=POLICY_KINDS):
    """``((kind, n, case seed), config)``: a ppo_update case and its config (``common`` plus a drawn minibatch size,
    shuffle seed, max_grad_norm, normalize_advantages and ent_coef)."""
    return _first_step_cases(_check_common(common), _check_kinds(kinds))


@st.composite
def _first_step_cases(draw, common, kinds):
    kind = draw(st.sampled_from(kinds))
    n = draw(st.integers(2, 10))
    config = {**common, "minibatch_size": draw(st.integers(2, n)), "seed": draw(st.integers(0, 2**16)),
              "max_grad_norm": draw(st.sampled_from([1e6, 0.05, 0.5])),
              "normalize_advantages": draw(st.booleans()), "ent_coef": draw(st.sampled_from([0.0, 0.01, 0.1]))}
    return (kind, n, draw(st.integers(0, 2**16))), config


LEARNING_RATES = {"categorical": (0.1, 0.5), "gaussian": (0.05, 0.2)}


def update_cases(*, common: dict | None = None, kinds=POLICY_KINDS):
    """``((kind, n, case seed, lr), config)``: a whole update, 1..3 epochs of minibatches of 2..n (a remainder,
    possibly of one sample, in a last smaller one), with drawn max_grad_norm, normalize_advantages, ent_coef."""
    return _update_cases(_check_common(common), _check_kinds(kinds))


@st.composite
def _update_cases(draw, common, kinds):
    (kind, n, seed), config = draw(_first_step_cases(common, kinds))
    config["epochs"] = draw(st.integers(1, 3))
    return (kind, n, seed, draw(st.sampled_from(LEARNING_RATES[kind]))), config


def value_clip_cases(*, common: dict | None = None, kinds=POLICY_KINDS):
    """``((kind, n, case seed, lr, value spread), config)``: as ``update_cases``, with values_old = V + N(0, spread^2),
    spread in [0.05, 1], and value_clip_eps drawn from 0.1, 0.2, 0.5 (unless ``common`` sets it)."""
    return _value_clip_cases(_check_common(common), _check_kinds(kinds))


@st.composite
def _value_clip_cases(draw, common, kinds):
    (kind, n, seed, lr), config = draw(_update_cases(common, kinds))
    config["value_clip_eps"] = draw(st.sampled_from([0.1, 0.2, 0.5]))
    return (kind, n, seed, lr, draw(_floats(0.05, 1.0))), config


def minibatch_cases(*, kinds=POLICY_KINDS):
    """``(kind, n, case seed, config)``: 8..12 samples, minibatches of 2..n - 1, 4 or 5 epochs. A correct update's
    epochs all share one order with probability (1/n!)^(epochs - 1) <= (1/8!)^3 < 2e-14: the fresh-order test
    cannot raise a false alarm in practice."""
    return _minibatch_cases(_check_kinds(kinds))


@st.composite
def _minibatch_cases(draw, kinds):
    kind, n = draw(st.sampled_from(kinds)), draw(st.integers(8, 12))
    config = {"minibatch_size": draw(st.integers(2, n - 1)), "epochs": draw(st.integers(4, 5)), "seed": draw(st.integers(0, 2**16))}
    return kind, n, draw(st.integers(0, 2**16)), config

"""Strategies for the token-level RLHF chapter's operations: (B, L) rows of real tokens inside padding and
interior masked spans, with garbage at the masked positions (``token_gae``: :func:`gae_cases`;
``assemble_rewards``: :func:`reward_cases`; ``aggregate_loss``: :func:`loss_cases`; ``token_ppo_loss``:
:func:`ppo_cases`).

Garbage is large but finite (a model's outputs at pad positions), never NaN or inf.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ....spec import contract
from .base import _check_dtype
from .base import normal_floats as _floats
from .base import rounded

GARBAGE = st.sampled_from([1e6, -1e6, 1e30, -3e29, 7.0]) | _floats(-1e6, 1e6)
FRACTIONS = st.sampled_from([0.0, 0.5, 0.95, 0.99, 1.0]) | _floats(0.0, 1.0)
PADDINGS = ("right", "left", "both", "none")
AGGREGATION_MODES = contract.convention("aggregate_loss_modes").allowed


def _check_padding(padding) -> tuple[str, ...]:
    padding = tuple(padding)
    if not padding or not set(padding) <= set(PADDINGS):
        raise InvalidArgument(f"padding={padding!r} must be a non-empty subset of {PADDINGS}")
    return padding


def _check_rows(min_rows: int, max_rows: int) -> None:
    if not (1 <= min_rows <= max_rows):
        raise InvalidArgument(f"need 1 <= min_rows={min_rows} <= max_rows={max_rows}")


# ---------------------------------------------------------------------------------------------
# rows: layout of real tokens inside a (B, L) batch


@dataclass(frozen=True)
class Rows:
    """A batch of response rows: ``real[b]`` the row's real-token values (one array per field),
    ``layout[b]`` the positions of its real tokens, ``fill`` the values at masked positions."""

    fields: dict  # name -> (B, L) float64 arrays, garbage at masked positions
    mask: np.ndarray  # (B, L) bool

    @property
    def shape(self):
        return self.mask.shape


def layout_rows(real: list[dict], positions: list[list[int]], width: int, fill: Callable[[str, int, int], float]) -> Rows:
    """Place each row's real values at its positions; ``fill(name, b, t)`` at the rest."""
    names = list(real[0])
    B = len(real)
    mask = np.zeros((B, width), dtype=bool)
    fields = {name: np.zeros((B, width)) for name in names}
    for b, (values, where) in enumerate(zip(real, positions)):
        mask[b, where] = True
        for name in names:
            row = np.array([fill(name, b, t) for t in range(width)], dtype=np.float64)
            row[where] = values[name]
            fields[name][b] = row
    return Rows(fields, mask)


@st.composite
def row_layouts(draw, lengths, *, padding=("right", "left", "both", "none"), interior=False, extra=3):
    """For rows of the given real lengths: (positions per row, width). Rows are padded on the side
    drawn for each; ``interior`` puts masked spans of 1-2 tokens between real tokens (at least one)."""
    plans = []
    for n in lengths:
        side = draw(st.sampled_from(padding))
        left = draw(st.integers(1, extra)) if side in ("left", "both") else 0
        right = draw(st.integers(1, extra)) if side in ("right", "both") else 0
        gaps = [0] * max(n - 1, 0)
        if interior and n >= 2:
            gaps = draw(st.lists(st.integers(0, 2), min_size=n - 1, max_size=n - 1))
            if not any(gaps):
                gaps[draw(st.integers(0, n - 2))] = draw(st.integers(1, 2))
        plans.append((side, left, gaps, right))
    width = max(left + n + sum(gaps) + right for (_, left, gaps, right), n in zip(plans, lengths))
    positions = []
    for (side, left, gaps, right), n in zip(plans, lengths):
        used = left + n + sum(gaps) + right
        shift = width - used if side == "left" else 0  # a left-padded row is flush right, others flush left
        where, t = [], left + shift
        for k in range(n):
            where.append(t)
            t += 1 + (gaps[k] if k < len(gaps) else 0)
        positions.append(where)
    return positions, width


def _garbage_fill(draw):
    table: dict = {}

    def fill(name, b, t):
        if (name, b, t) not in table:
            table[(name, b, t)] = float(draw(GARBAGE))
        return table[(name, b, t)]

    return fill


# ---------------------------------------------------------------------------------------------
# token_gae


@dataclass(frozen=True)
class GaeCase:
    rewards: np.ndarray
    values: np.ndarray
    mask: np.ndarray
    gamma: float
    lam: float

    def rounded(self, dtype) -> "GaeCase":
        return GaeCase(rounded(self.rewards, dtype), rounded(self.values, dtype), self.mask, self.gamma, self.lam)

    def arguments(self):
        return {"rewards": self.rewards, "values": self.values, "mask": self.mask, "gamma": self.gamma, "lam": self.lam}

    def row(self, b) -> "GaeCase":
        return GaeCase(self.rewards[b : b + 1], self.values[b : b + 1], self.mask[b : b + 1], self.gamma, self.lam)


def gae_case(rewards, values, mask, gamma, lam) -> GaeCase:
    f = lambda a: np.atleast_2d(np.asarray(a, dtype=np.float64))
    return GaeCase(f(rewards), f(values), np.atleast_2d(np.asarray(mask, dtype=bool)), float(gamma), float(lam))


def gae_cases(*, dtype=np.float64, max_rows: int = 4, max_length: int = 6, padding=PADDINGS, interior: bool = False,
              garbage: bool = True, min_rows: int = 1):
    """Rows of real rewards and values in [-10, 10] (``interior``: with masked spans between real tokens), gamma
    and lambda in [0, 1]; garbage (or zeros) at masked positions."""
    _check_rows(min_rows, max_rows)
    if max_length < (2 if interior else 1):
        raise InvalidArgument(f"max_length={max_length} must be at least {2 if interior else 1}")
    return _gae_cases(_check_dtype(dtype), max_rows=max_rows, max_length=max_length, padding=_check_padding(padding),
                      interior=interior, garbage=garbage, min_rows=min_rows)


@st.composite
def _gae_cases(draw, dtype, *, max_rows=4, max_length=6, padding=("right", "left", "both", "none"), interior=False,
              garbage=True, min_rows=1):
    lengths = draw(st.lists(st.integers(2 if interior else 1, max_length), min_size=min_rows, max_size=max_rows), label="lengths")
    positions, width = draw(row_layouts(lengths, padding=padding, interior=interior))
    real = [{"rewards": draw(st.lists(_floats(-10.0, 10.0), min_size=n, max_size=n)),
             "values": draw(st.lists(_floats(-10.0, 10.0), min_size=n, max_size=n))} for n in lengths]
    fill = _garbage_fill(draw) if garbage else (lambda name, b, t: 0.0)
    rows = layout_rows(real, positions, width, fill)
    gamma, lam = float(draw(FRACTIONS, label="gamma")), float(draw(FRACTIONS, label="lam"))
    return gae_case(rows.fields["rewards"], rows.fields["values"], rows.mask, gamma, lam).rounded(dtype)


def padded_rows(*, dtype=np.float64):
    """``(case, left, right)``: one unpadded row and the padding widths (1..3 each) to put around it."""
    return st.tuples(gae_cases(dtype=dtype, max_rows=1, padding=("none",), garbage=False), st.integers(1, 3), st.integers(1, 3))


# ---------------------------------------------------------------------------------------------
# assemble_rewards


def reward_cases(*, dtype=np.float64, padding=PADDINGS, interior: bool = False, max_rows: int = 4):
    """``(scores, kl, mask, kl_coef)``: rows of 1..6 real tokens with kl in [-5, 5], scores in [-10, 10]."""
    _check_rows(1, max_rows)
    return _reward_cases(_check_dtype(dtype), padding=_check_padding(padding), interior=interior, max_rows=max_rows)


@st.composite
def _reward_cases(draw, dtype, padding=("right", "left", "both", "none"), interior=False, max_rows=4):
    lengths = draw(st.lists(st.integers(1, 6), min_size=1, max_size=max_rows), label="lengths")
    positions, width = draw(row_layouts(lengths, padding=padding, interior=interior and min(lengths) >= 2))
    real = [{"kl": draw(st.lists(_floats(-5.0, 5.0), min_size=n, max_size=n))} for n in lengths]
    rows = layout_rows(real, positions, width, _garbage_fill(draw))
    scores = np.array(draw(st.lists(_floats(-10.0, 10.0), min_size=len(lengths), max_size=len(lengths))))
    coef = float(draw(st.sampled_from([0.05, 0.5, 0.0]) | _floats(0.0, 1.0), label="kl_coef"))
    return rounded(scores, dtype), rounded(rows.fields["kl"], dtype), rows.mask, coef


# ---------------------------------------------------------------------------------------------
# aggregate_loss


def loss_cases(*, dtype=np.float64, min_rows: int = 1, max_rows: int = 4, max_length: int = 6, padding=PADDINGS,
               interior: bool = True):
    """``(per_token_loss, mask)``: rows of 1..max_length real losses in [-10, 10], garbage at masked positions."""
    _check_rows(min_rows, max_rows)
    return _loss_cases(_check_dtype(dtype), min_rows=min_rows, max_rows=max_rows, max_length=max_length,
                       padding=_check_padding(padding), interior=interior)


@st.composite
def _loss_cases(draw, dtype, *, min_rows=1, max_rows=4, max_length=6, padding=("right", "left", "both", "none"), interior=True):
    lengths = draw(st.lists(st.integers(1, max_length), min_size=min_rows, max_size=max_rows), label="lengths")
    positions, width = draw(row_layouts(lengths, padding=padding, interior=interior and min(lengths) >= 2))
    real = [{"loss": draw(st.lists(_floats(-10.0, 10.0), min_size=n, max_size=n))} for n in lengths]
    rows = layout_rows(real, positions, width, _garbage_fill(draw))
    return rounded(rows.fields["loss"], dtype), rows.mask


def aggregation_cases(*, dtype=np.float64, modes=AGGREGATION_MODES):
    """``(per_token_loss, mask, mode, num_tokens, norm_length)``: a mode of ``modes``, with num_tokens (token-mean)
    or norm_length (seq-mean-token-sum-norm) drawn or None."""
    if not modes:
        raise InvalidArgument("modes must name at least one aggregation mode")
    return _aggregation_cases(_check_dtype(dtype), tuple(modes))


@st.composite
def _aggregation_cases(draw, dtype, modes):
    losses, mask = draw(loss_cases(dtype=dtype))
    mode = draw(st.sampled_from(modes), label="mode")
    num_tokens = draw(st.none() | st.integers(1, 64), label="num_tokens") if mode == "token-mean" else None
    norm_length = draw(st.none() | st.integers(1, 64), label="norm_length") if mode == "seq-mean-token-sum-norm" else None
    return losses, mask, mode, num_tokens, norm_length


def microbatch_cases(*, dtype=np.float64):
    """``(per_token_loss, mask, cuts)``: at least two rows and 1..2 cuts between rows into micro-batches."""
    return _microbatch_cases(_check_dtype(dtype))


@st.composite
def _microbatch_cases(draw, dtype):
    losses, mask = draw(loss_cases(dtype=dtype, min_rows=2))
    cuts = sorted(set(draw(st.lists(st.integers(1, len(mask) - 1), min_size=1, max_size=2))))
    return losses, mask, tuple(cuts)


def widened_cases(*, dtype=np.float64):
    """``(per_token_loss, mask, extra, norm_length)``: right- or un-padded rows, 1..4 extra masked columns to add,
    norm_length in 1..32."""
    return _widened_cases(_check_dtype(dtype))


@st.composite
def _widened_cases(draw, dtype):
    losses, mask = draw(loss_cases(dtype=dtype, padding=("right", "none"), interior=False))
    return losses, mask, draw(st.integers(1, 4)), draw(st.integers(1, 32))


def unequal_rows(*, dtype=np.float64):
    """``(per_token_loss, mask)`` with at least two rows (of drawn, usually different, lengths)."""
    return _unequal_rows(_check_dtype(dtype))


@st.composite
def _unequal_rows(draw, dtype):
    losses, mask = draw(loss_cases(dtype=dtype, min_rows=2))
    return losses, mask


# ---------------------------------------------------------------------------------------------
# token_ppo_loss


def ppo_cases(*, dtype=np.float64, log_ratio=None, logp_old=None, advantage=None, dual: bool = False, padding=PADDINGS,
              interior: bool = True, clip=None):
    """``(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip)``: 1..3 rows of 1..5 real tokens
    (log r in [-3, 3], logp_old in [-50, 0], A likely +-2, +-1 or 0 by default), garbage at masked tokens;
    clip_low and clip_high drawn in [0.01, 0.5] unless ``clip`` gives them; ``dual``: a dual clip above 1 + clip_high."""
    if clip is not None and not (len(clip) == 2 and all(0 < c < 1 for c in clip)):
        raise InvalidArgument(f"clip={clip!r} must be (clip_low, clip_high) in (0, 1)")
    return _ppo_cases(_check_dtype(dtype), log_ratio=log_ratio if log_ratio is not None else _floats(-3.0, 3.0),
                      logp_old=logp_old if logp_old is not None else _floats(-50.0, 0.0), advantage=advantage, dual=dual,
                      padding=_check_padding(padding), interior=interior, clip=clip)


@st.composite
def _ppo_cases(draw, dtype, *, log_ratio=_floats(-3.0, 3.0), logp_old=_floats(-50.0, 0.0), advantage=None, dual=False,
              padding=("right", "left", "both", "none"), interior=True, clip=None):
    advantage = advantage or (st.sampled_from([2.0, -2.0, 1.0, -1.0, 0.0]) | _floats(-100.0, 100.0))
    lengths = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3), label="lengths")
    positions, width = draw(row_layouts(lengths, padding=padding, interior=interior and min(lengths) >= 2, extra=2))
    real = []
    for n in lengths:
        old = np.array(draw(st.lists(logp_old, min_size=n, max_size=n)))
        x = np.array(draw(st.lists(log_ratio, min_size=n, max_size=n)))
        real.append({"old": rounded(old, dtype), "new": rounded(rounded(old, dtype) + x, dtype),
                     "A": draw(st.lists(advantage, min_size=n, max_size=n))})
    garbage = {"old": _floats(-50.0, 1.0), "new": _floats(-50.0, 1.0), "A": _floats(-1e3, 1e3)}
    table: dict = {}

    def fill(name, b, t):
        return table.setdefault((name, b, t), float(draw(garbage[name])))

    rows = layout_rows(real, positions, width, fill)
    clip_low, clip_high = clip if clip is not None else (float(draw(_floats(0.01, 0.5))), float(draw(_floats(0.01, 0.5))))
    c = float(draw(_floats(1.0 + clip_high + 0.05, 10.0))) if dual else None
    f = rows.fields
    return rounded(f["new"], dtype), rounded(f["old"], dtype), rounded(f["A"], dtype), rows.mask, clip_low, clip_high, c

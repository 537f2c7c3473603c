"""Strategies for the GAE chapter's operations: ``gae`` (:func:`rollouts`) and ``rewards_to_go``
(:func:`episodes`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.extra import numpy as hnp

from .base import _check_dtype, discounts, finite_floats, rounded, trace_factors

NONE, TERMINATED, TRUNCATED, BOTH = 0, 1, 2, 3


@dataclass(frozen=True)
class Rollout:
    """A time-major rollout as the protocol's ``gae`` receives it; arrays (T,) or (T, N)."""

    rewards: np.ndarray
    values: np.ndarray
    next_values: np.ndarray
    terminated: np.ndarray  # bool: s_{t+1} is terminal
    truncated: np.ndarray  # bool: a time limit ended the episode after step t
    gamma: float
    lam: float

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.rewards.shape)

    @property
    def T(self) -> int:
        return self.shape[0]

    @property
    def episode_end(self) -> np.ndarray:
        return np.logical_or(self.terminated, self.truncated)

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments for the protocol's ``gae``, in protocol order."""
        return {
            "rewards": self.rewards,
            "values": self.values,
            "next_values": self.next_values,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "gamma": self.gamma,
            "lam": self.lam,
        }

    def column(self, j: int) -> "Rollout":
        """Environment ``j`` of a (T, N) rollout as a (T,) rollout."""
        pick = lambda a: np.ascontiguousarray(a[:, j])
        return replace(self, **{k: pick(getattr(self, k)) for k in ("rewards", "values", "next_values", "terminated", "truncated")})

    def with_(self, **changes) -> "Rollout":
        return replace(self, **changes)

    def rounded(self, dtype) -> "Rollout":
        """The same rollout with every float array rounded to ``dtype`` (kept as float64)."""
        cast = lambda a: rounded(a, dtype)
        return replace(self, rewards=cast(self.rewards), values=cast(self.values), next_values=cast(self.next_values))

    @classmethod
    def of(cls, rewards, values, next_values, terminated, truncated, gamma, lam) -> "Rollout":
        f = lambda a: np.asarray(a, dtype=np.float64)
        b = lambda a: np.asarray(a, dtype=bool)
        return cls(f(rewards), f(values), f(next_values), b(terminated), b(truncated), float(gamma), float(lam))


@st.composite
def episode_ends(draw, shape: tuple[int, ...], *, min_ends: int = 0, end_weight: int = 1, allow_both: bool = True):
    """``(terminated, truncated)`` bool arrays of ``shape``; each column has at least ``min_ends`` ends.

    ``end_weight`` (1..6) raises the chance of an end at each step. ``allow_both``: steps where
    both flags are set (Gymnasium allows it; terminated must win).
    """
    if min_ends < 0 or min_ends > shape[0]:
        raise InvalidArgument(f"min_ends={min_ends} must be between 0 and T={shape[0]}")
    kinds = [NONE] * 6 + [TERMINATED, TRUNCATED] * end_weight + ([BOTH] if allow_both else [])
    codes = draw(hnp.arrays(np.int8, shape, elements=st.sampled_from(kinds)), label="episode end codes")
    columns = codes.reshape(shape[0], -1)
    for j in range(columns.shape[1]):
        while int(np.count_nonzero(columns[:, j])) < min_ends:
            free = np.flatnonzero(columns[:, j] == NONE)
            t = draw(st.sampled_from(sorted(free.tolist())), label=f"forced end, column {j}")
            columns[t, j] = draw(st.sampled_from([TERMINATED, TRUNCATED, BOTH] if allow_both else [TERMINATED, TRUNCATED]))
    codes = columns.reshape(shape)
    return (codes == TERMINATED) | (codes == BOTH), (codes == TRUNCATED) | (codes == BOTH)


@st.composite
def rollouts(
    draw,
    *,
    T: int | st.SearchStrategy[int] = st.integers(1, 24),
    n_envs: int | None | st.SearchStrategy = None,
    gamma: float | st.SearchStrategy[float] | None = None,
    lam: float | st.SearchStrategy[float] | None = None,
    elements: st.SearchStrategy[float] | None = None,
    min_episode_ends: int = 0,
    end_weight: int = 1,
    dtype=np.float64,
) -> Rollout:
    """A time-major rollout with terminal and truncated ends and a consistent critic.

    ``values`` and ``next_values`` come from one sequence of state values per environment, so
    ``next_values[t] == values[t+1]`` inside an episode; at an episode end ``next_values[t]`` is the
    value of the episode's final observation, drawn on its own (the next episode starts from a
    different state), and at the rollout's end it is V(s_T). ``n_envs=None`` gives (T,) arrays.
    """
    dtype = _check_dtype(dtype)
    as_strategy = lambda x: x if isinstance(x, st.SearchStrategy) else st.just(x)
    steps = draw(as_strategy(T), label="T")
    envs = draw(as_strategy(n_envs), label="n_envs")
    if steps < 1 or (envs is not None and envs < 1):
        raise InvalidArgument(f"T={steps} and n_envs={envs} must be at least 1")
    shape = (steps,) if envs is None else (steps, envs)
    elements = elements if elements is not None else finite_floats(dtype=dtype)
    state_values = draw(hnp.arrays(np.float64, (steps + 1,) + shape[1:], elements=elements), label="V(s_0..s_T)")
    final_values = draw(hnp.arrays(np.float64, shape, elements=elements), label="V(final observation)")
    rewards = draw(hnp.arrays(np.float64, shape, elements=elements), label="rewards")
    terminated, truncated = draw(episode_ends(shape, min_ends=min_episode_ends, end_weight=end_weight), label="ends")
    values = state_values[:-1]
    next_values = np.where(terminated | truncated, final_values, state_values[1:])
    g = draw(as_strategy(gamma if gamma is not None else discounts()), label="gamma")
    l = draw(as_strategy(lam if lam is not None else trace_factors()), label="lam")
    return Rollout(rewards, values, next_values, terminated, truncated, float(g), float(l)).rounded(dtype)


@st.composite
def episodes(draw, *, T: int | st.SearchStrategy[int] = st.integers(1, 24), elements=None, gamma=None, dtype=np.float64):
    """``(rewards (T,), gamma)`` for one episode, as ``rewards_to_go`` receives them."""
    dtype = _check_dtype(dtype)
    steps = draw(T if isinstance(T, st.SearchStrategy) else st.just(T), label="T")
    elements = elements if elements is not None else finite_floats(dtype=dtype)
    rewards = draw(hnp.arrays(np.float64, (steps,), elements=elements), label="rewards")
    g = draw(gamma if isinstance(gamma, st.SearchStrategy) else st.just(gamma) if gamma is not None else discounts(), label="gamma")
    return rounded(rewards, dtype), float(g)

"""The public strategies produce what they promise (array-api-tests' meta-tests, in small)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from rlspec.checks.strategies import discounts, episode_ends, episodes, finite_floats, rollouts


@given(rollouts(n_envs=st.none() | st.integers(1, 3)))
def test_next_values_follow_values_inside_episodes(r):
    inside = ~r.episode_end[:-1]
    np.testing.assert_array_equal(r.next_values[:-1][inside], r.values[1:][inside])
    assert r.rewards.shape == r.values.shape == r.next_values.shape == r.terminated.shape
    assert 0.0 <= r.gamma <= 1.0 and 0.0 <= r.lam <= 1.0


@given(rollouts(dtype=np.float32, n_envs=2))
def test_float32_rollouts_are_representable(r):
    for a in (r.rewards, r.values, r.next_values):
        assert a.dtype == np.float64
        np.testing.assert_array_equal(a.astype(np.float32).astype(np.float64), a)


@given(st.data())
def test_min_episode_ends_is_honoured(data):
    T = data.draw(st.integers(1, 10))
    k = data.draw(st.integers(0, T))
    term, trunc = data.draw(episode_ends((T, 2), min_ends=k))
    assert ((term | trunc).sum(axis=0) >= k).all()


@given(episodes(T=5, gamma=0.9))
def test_episodes(e):
    rewards, gamma = e
    assert rewards.shape == (5,) and gamma == 0.9


@pytest.mark.parametrize(
    "strategy",
    [
        lambda: finite_floats(max_abs=-1.0),
        lambda: finite_floats(dtype=np.int32),
        lambda: discounts(min_value=0.9, max_value=0.1),
        lambda: rollouts(T=0),
        lambda: episode_ends((3,), min_ends=4),
    ],
)
def test_invalid_arguments_are_named(strategy):
    with pytest.raises(InvalidArgument):
        strategy().example()


def test_column_and_rounding_helpers():
    r = rollouts(T=4, n_envs=3).example()
    column = r.column(1)
    assert column.shape == (4,) and np.array_equal(column.rewards, r.rewards[:, 1])
    assert r.rounded(np.float32).rewards.dtype == np.float64

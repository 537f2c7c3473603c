"""The public strategies produce what they promise (array-api-tests' meta-tests, in small)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from rlspec.checks.kit.strategies import discounts, episode_ends, episodes, finite_floats, rollouts
from rlspec.checks.runner.verdict import EXAMPLE_TIERS, PROFILES


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


# ---------------------------------------------------------------------------------------------
# example budgets: one table of tiers (rlspec.checks.runner.verdict.EXAMPLE_TIERS)

# The counts each chapter drew per property before the table existed (quick, ci, thorough): a tier
# changes them only with a reason next to it.
TIER_COUNTS = {
    "call": (12, 100, 1000), "grouped": (6, 50, 500), "autograd": (4, 33, 333), "autograd-weights": (8, 66, 666),
    "enumeration": (2, 16, 166), "kl-stop": (1, 8, 83), "known-answers-first": (3, 100, 1000),
    "known-answers-first-costly": (2, 33, 333), "training": (0, 3, 30), "quadrature": (3, 25, 250),
}


@pytest.mark.parametrize("tier", sorted(EXAMPLE_TIERS))
def test_every_tier_has_its_counts_and_a_reason(tier):
    assert tuple(EXAMPLE_TIERS[tier].examples(PROFILES[p]) for p in ("quick", "ci", "thorough")) == TIER_COUNTS[tier]
    assert EXAMPLE_TIERS[tier].reason


def test_every_tier_is_used_by_a_check():
    import re
    from pathlib import Path

    source = "".join(p.read_text() for p in (Path(__file__).parents[1] / "checks" / "clauses").glob("*.py"))
    used = set(re.findall(r'tier="([\w-]+)"', source)) | set(re.findall(r'examples\("([\w-]+)"\)', source)) | {"call"}
    assert used == set(EXAMPLE_TIERS)

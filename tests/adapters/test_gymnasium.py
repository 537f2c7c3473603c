"""The ``gymnasium`` adapter against Gymnasium 1.4: its verdicts (tests/adapters/expected/gymnasium.toml, for the
single-environment wrappers and the vector ones) and the library facts behind them, read from the wrappers directly.

Gymnasium is a core dependency of rlspec, so these run wherever rlspec's tests do (RLSPEC_REQUIRE_ADAPTERS=1
changes nothing here).
"""

import numpy as np
import pytest

from _verdicts import verdict_tests  # noqa: E402

import gymnasium as gym  # noqa: E402
from gymnasium.wrappers import NormalizeReward  # noqa: E402
from gymnasium.wrappers.utils import RunningMeanStd  # noqa: E402
from rlspec.checks.adapters import gymnasium as adapter  # noqa: E402

test_verdict, test_unlisted_clauses, test_table_names_every_candidate = verdict_tests("gymnasium")


def test_version_is_the_one_the_adapter_was_written_against():
    assert adapter.RLSPEC_VERSION.startswith("gymnasium 1.4."), adapter.RLSPEC_VERSION


def test_running_mean_std_starts_at_count_1e_4():
    rms = RunningMeanStd(shape=(1,))
    assert (rms.count, rms.mean.tolist(), rms.var.tolist()) == (1e-4, [0.0], [1.0])
    rms.update(np.array([[2.0], [4.0]]))
    assert rms.mean[0] == pytest.approx(2.99985000749963, abs=1e-14)  # the contract's known answer
    assert rms.var[0] == pytest.approx(1.00044995500337, abs=1e-14)


class _Steps(gym.Env):
    """Rewards 1 with the given flags, one per step."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
    action_space = gym.spaces.Discrete(1)

    def __init__(self, terminated, truncated):
        self.flags, self.t = list(zip(terminated, truncated)), 0

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        term, trunc = self.flags[self.t]
        self.t += 1
        return np.zeros(1, dtype=np.float32), 1.0, term, trunc, {}


def accumulated(terminated, truncated, gamma=0.5):
    """The wrapper's accumulator after each step (a reset() after every end, as a vector env's autoreset calls it)."""
    env = NormalizeReward(_Steps(terminated, truncated), gamma=gamma)
    env.reset()
    out = []
    for _ in terminated:
        _, _, term, trunc, _ = env.step(0)
        out.append(float(env.discounted_reward[0]))
        if term or trunc:
            env.reset()
    return out


def test_normalize_reward_zeroes_the_history_with_the_terminated_steps_own_flag():
    """The episode ends after step 1: the right accumulators are 1, 1.5, 1; Gymnasium's are 1, 1 (the terminal
    step's return lost), 1.5 (the next episode starts from gamma r_1)."""
    assert accumulated([False, True, False], [False, False, False]) == [1.0, 1.0, 1.5]


def test_normalize_reward_never_resets_at_a_time_limit():
    assert accumulated([False, False, False], [False, True, False]) == [1.0, 1.5, 1.75]

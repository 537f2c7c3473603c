"""The time-major -> per-episode rows conversion verl's and OpenRLHF's adapters share
(rlspec.checks.adapters._rows): row GAE with the bootstrap folded in equals time-major GAE."""

import numpy as np
import torch

from rlspec.checks.adapters._rows import episode_rows
from rlspec.reference.gae import gae
from rlspec.reference.rlhf import token_gae


def test_rows_reproduce_time_major_gae():
    rng = np.random.default_rng(0)
    T, N, gamma, lam = 9, 3, 0.9, 0.8
    rewards, values, next_values = rng.normal(size=(3, T, N))
    terminated = np.zeros((T, N), bool)
    truncated = np.zeros((T, N), bool)
    terminated[2, 0] = truncated[5, 1] = terminated[4, 2] = truncated[6, 2] = True
    inside = ~(terminated | truncated)[:-1]  # within an episode, V(s_{t+1}) is the next step's value
    next_values[:-1][inside] = values[1:][inside]
    rows = episode_rows(rewards, values, next_values, terminated, truncated, gamma)
    assert [s for s in rows.segments if s[0] == 2] == [(2, 0, 4), (2, 5, 6), (2, 7, 8)]
    row_advantages, _ = token_gae(rows.rewards.numpy(), rows.values.numpy(), rows.mask.numpy(), gamma, lam)
    expected, _ = gae(rewards, values, next_values, terminated, truncated, gamma, lam)
    np.testing.assert_allclose(rows.scatter(torch.as_tensor(row_advantages)).numpy(), expected, rtol=1e-12, atol=1e-12)
    one = episode_rows(rewards[:, 0], values[:, 0], next_values[:, 0], terminated[:, 0], truncated[:, 0], gamma)
    assert one.scatter(one.rewards).shape == (T,)

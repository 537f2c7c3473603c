"""The gridworld as a ``gymnasium.Env``: what a candidate's ``train_ppo(env, iterations, seed)`` receives.

Observations are cell indices (``Discrete(S)``), actions ``Discrete(4)`` (up, right, down, left).
Entering the goal or the pit ends the episode with ``terminated=True``; an episode that reaches the
world's time limit first ends with ``truncated=True`` (a time limit is not a terminal state: the
final observation still has a value). Every number comes from ``rlspec.reference.gridworld``.

    >>> env = GridworldEnv()
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step(1)
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ...reference.gridworld import ACTIONS, GRIDWORLD, Gridworld, tabular


class GridworldEnv(gym.Env):
    """Russell and Norvig's 4x3 world with slippery moves and a time limit."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, world: Gridworld = GRIDWORLD, render_mode: str | None = None):
        self.world = world
        self.mdp = tabular(world)
        S, A = self.mdp.P.shape[:2]
        self.observation_space = spaces.Discrete(S)
        self.action_space = spaces.Discrete(A)
        self.render_mode = render_mode
        self._cumulative = np.cumsum(self.mdp.P, axis=2)  # (S, A, S) for inverse-CDF sampling
        self._state = self.mdp.start
        self._elapsed = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._state, self._elapsed = self.mdp.start, 0
        return self._state, {}

    def step(self, action):
        if self.mdp.terminal[self._state]:
            raise RuntimeError("step() after the episode ended: call reset()")
        try:
            a = int(action)
        except (TypeError, ValueError):
            raise ValueError(f"action {action!r} is not in {self.action_space}") from None
        if a != action or not 0 <= a < self.action_space.n:  # 1.5 or 7 are not actions
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        row = self._cumulative[self._state, a]
        # inverse CDF: the first s' with CDF(s') > u, for u uniform below the row's total (which may
        # round to just under 1), so only a successor with positive probability can come out
        s_next = int(np.searchsorted(row, self.np_random.random() * row[-1], side="right"))
        self._state, self._elapsed = s_next, self._elapsed + 1
        terminated = bool(self.mdp.terminal[s_next])
        truncated = not terminated and self._elapsed >= self.world.time_limit
        return s_next, float(self.mdp.reward[s_next]), terminated, truncated, {}

    def render(self):
        grid = [list(row) for row in self.world.layout]
        i, j = self.mdp.cells[self._state]
        grid[i][j] = "@"
        return "\n".join("".join(row) for row in grid)


__all__ = ["ACTIONS", "GridworldEnv"]

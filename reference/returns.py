"""Discounted returns (reward-to-go).

    G_t = sum_{k>=0} gamma^k r_{t+k}  =  r_t + gamma G_{t+1},   G_T = 0

Williams (1992); Sutton & Barto (2018) §3.3, eq. 3.9. ``rewards[t]`` is the reward for the action taken at step ``t``.
"""

from __future__ import annotations

import numpy as np


def rewards_to_go(rewards: np.ndarray, gamma: float) -> np.ndarray:
    """Reward-to-go of one episode, by the backward recursion ``G_t = r_t + gamma G_{t+1}``.

    rewards: (T,) -> returns (T,), same dtype.
    """
    returns = np.zeros_like(rewards)  # (T,)
    running = 0.0  # G_T: nothing after the episode's last step
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns

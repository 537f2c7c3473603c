"""Correct variant, written the way Stable-Baselines3 does it: the time-limit bootstrap is folded
into a *copy* of the rewards, the loop reads ``values[t+1]`` inside the rollout and the last value
at its end, and one ``next_non_terminal`` mask serves both the bootstrap and the trace. It relies
on next_values[t] == values[t+1] within an episode, which the protocol guarantees."""

import numpy as np


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    T = rewards.shape[0]
    timeout = truncated & ~terminated
    shaped = rewards + gamma * np.where(timeout, next_values, 0.0)  # a copy: the caller's array is untouched
    dones = terminated | truncated
    advantages = np.zeros_like(shaped)
    last_gae_lam = 0.0
    for step in reversed(range(T)):
        next_non_terminal = 1.0 - dones[step]
        next_value = next_values[step] if step == T - 1 else values[step + 1]
        delta = shaped[step] + gamma * next_value * next_non_terminal - values[step]
        last_gae_lam = delta + gamma * lam * next_non_terminal * last_gae_lam
        advantages[step] = last_gae_lam
    return advantages, advantages + values

"""Mutant: episode-end flags used as SB3-style episode-start flags, ``1 - episode_starts[t+1]``,
so every cut lands one step late (bug B1, SB3 #105; B13 RoboVerse #814)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-TERMINAL-NO-BOOTSTRAP", "GAE-SEED-EXAMPLE", "GRID-GAE-EXPECTATION-EXACT-CRITIC"], "bug": "B1 sb3-dones-current-vs-last"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    T = len(rewards)
    episode_starts = np.logical_or(terminated, truncated)  # wrong: these are episode *ends*
    advantages = np.zeros_like(rewards)
    last = np.zeros_like(rewards[0])
    for t in reversed(range(T)):
        if t == T - 1:
            next_non_terminal = 1.0 - terminated[t]
        else:
            next_non_terminal = 1.0 - episode_starts[t + 1]
        delta = rewards[t] + gamma * next_non_terminal * next_values[t] - values[t]
        last = delta + gamma * lam * next_non_terminal * last
        advantages[t] = last
    return advantages, advantages + values

"""Mutant: the trace decays by lambda alone (``gae = delta + lam * mask * gae``), a transcription
slip that only shows when gamma < 1."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-MONTE-CARLO-AT-LAMBDA-1", "GRID-GAE-EXPECTATION-CLOSED-FORM", "GRID-GAE-LAMBDA-ONE-CRITIC-CANCELS"], "bug": "gamma missing from the trace factor"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * np.where(terminated[t], 0.0, next_values[t]) - values[t]
        running = delta + lam * np.where(terminated[t] | truncated[t], 0.0, running)
        advantages[t] = running
    return advantages, advantages + values

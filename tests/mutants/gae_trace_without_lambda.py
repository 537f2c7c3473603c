"""Mutant: the advantage handed to the policy is ``delta_t + gamma * A_{t+1}``: lambda never enters
the trace (bug B7, Brax's PPO advantage; Stoix #142)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-TD-ERROR-AT-LAMBDA-0", "GRID-GAE-EXPECTATION-CLOSED-FORM"], "bug": "B7 brax-ppo-advantage-not-gae"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * np.where(terminated[t], 0.0, next_values[t]) - values[t]
        running = delta + gamma * np.where(terminated[t] | truncated[t], 0.0, running)
        advantages[t] = running
    return advantages, advantages + values

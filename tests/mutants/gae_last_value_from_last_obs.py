"""Mutant: the rollout's last step bootstraps from V of the last *stored* observation s_{T-1}
instead of V(s_T) (bug B2, SB3 #183)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-ROLLOUT-END-BOOTSTRAP"], "bug": "B2 sb3-last-bootstrap-value-from-previous-obs"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    T = len(rewards)
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in reversed(range(T)):
        next_value = values[T - 1] if t == T - 1 else next_values[t]
        delta = rewards[t] + gamma * np.where(terminated[t], 0.0, next_value) - values[t]
        running = delta + gamma * lam * np.where(terminated[t] | truncated[t], 0.0, running)
        advantages[t] = running
    return advantages, advantages + values

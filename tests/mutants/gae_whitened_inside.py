"""Mutant: the advantages are whitened (mean 0, std 1) inside the GAE function, as some RLHF code
does in its advantage helper, so the output no longer scales with the rewards."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-LINEARITY", "GRID-GAE-EXPECTATION-EXACT-CRITIC"], "bug": "advantages normalised inside gae"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * np.where(terminated[t], 0.0, next_values[t]) - values[t]
        running = delta + gamma * lam * np.where(terminated[t] | truncated[t], 0.0, running)
        advantages[t] = running
    returns = advantages + values
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    return advantages, returns

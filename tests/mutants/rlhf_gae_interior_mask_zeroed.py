"""Mutant: OpenRLHF 0.11.2's get_advantages_and_returns multiplies values and rewards by the action
mask and runs the plain recursion over every position. Edge padding is harmless (a zeroed pad after
the last real token bootstraps 0), but an interior span becomes discount steps with V = 0: the
reference row with a 2-token hole gives 0.533203125 instead of 1.03125 at its first token."""

import numpy as np

RLSPEC_MUTANT = {
    "clauses": ["RLHF-GAE-INTERIOR-MASK-SKIPPED"],
    "bug": "R7 openrlhf-gae-zeroes-interior-mask",
}


def token_gae(rewards, values, mask, gamma, lam):
    m = mask.astype(np.float64)
    values, rewards = values * m, rewards * m
    B, L = rewards.shape
    advantages = np.zeros((B, L))
    lastgaelam = np.zeros(B)
    for t in reversed(range(L)):
        nextvalues = values[:, t + 1] if t < L - 1 else 0.0
        delta = rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam = delta + gamma * lam * lastgaelam
        advantages[:, t] = lastgaelam
    return advantages, advantages + values

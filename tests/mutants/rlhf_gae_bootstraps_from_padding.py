"""Mutant: bug G1 (verl before PR #50, ROLL PR #447): the critic's values reach GAE unmasked
(the rewards are masked, as reward assembly leaves them), and the plain recursion over every
position lets the last real token bootstrap from the value at the first pad: mask [1, 1, 0],
rewards [0, 1, 0], values [0, 0, 100], gamma 1, lambda 0.95 gives [5.70, 6.00] instead of [0.95, 1.00]."""

import numpy as np

RLSPEC_MUTANT = {
    "clauses": ["RLHF-GAE-MASKED-GARBAGE-IGNORED", "RLHF-GAE-PADDING-INVARIANT"],
    "bug": "G1 gae-bootstraps-from-values-at-padding (verl PR #50, ROLL PR #447)",
}


def token_gae(rewards, values, mask, gamma, lam):
    rewards = rewards * mask
    B, L = rewards.shape
    advantages = np.zeros((B, L))
    lastgaelam = np.zeros(B)
    for t in reversed(range(L)):
        nextvalues = values[:, t + 1] if t < L - 1 else 0.0
        delta = rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam = delta + gamma * lam * lastgaelam
        advantages[:, t] = lastgaelam
    return advantages * mask, (advantages + values) * mask

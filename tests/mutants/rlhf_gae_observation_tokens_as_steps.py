"""Mutant: bug G2 (verl before PR #2337): GAE runs over every token of the row, tool-output
(observation) tokens and padding included, and the mask is applied only to the outputs: masked
tokens are discount steps whose rewards and values reach the real tokens. Tokens [a, obs, obs],
reward 1 on the last, gamma 1, lambda 0.95, V = 0: A(a) = 0.9025 instead of 1."""

import numpy as np

RLSPEC_MUTANT = {
    "clauses": ["RLHF-GAE-INTERIOR-MASK-SKIPPED", "RLHF-GAE-MASKED-GARBAGE-IGNORED"],
    "bug": "G2 gae-runs-over-non-trainable-observation-tokens (verl PR #2337)",
}


def token_gae(rewards, values, mask, gamma, lam):
    B, L = rewards.shape
    advantages = np.zeros((B, L))
    lastgaelam = np.zeros(B)
    for t in reversed(range(L)):
        nextvalues = values[:, t + 1] if t < L - 1 else 0.0
        delta = rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam = delta + gamma * lam * lastgaelam
        advantages[:, t] = lastgaelam
    return np.where(mask, advantages, 0.0), np.where(mask, advantages + values, 0.0)

"""Mutant: verl 0.9.1's compute_gae_advantage_return skips masked tokens correctly but returns
masked_whiten(advantages) (unbiased variance, rsqrt(var + 1e-8)) next to un-whitened returns."""

import numpy as np

RLSPEC_MUTANT = {
    "clauses": ["RLHF-GAE-KNOWN-ANSWER", "RLHF-GAE-ROW-EQUALS-GAE", "RLHF-GAE-RETURNS-EQUAL-ADVANTAGES-PLUS-VALUES"],
    "bug": "R6 verl-gae-returns-whitened-advantages",
}


def token_gae(rewards, values, mask, gamma, lam):
    m = mask.astype(np.float64)
    B, L = rewards.shape
    nextvalues, lastgaelam = np.zeros(B), np.zeros(B)
    advantages = np.zeros((B, L))
    for t in reversed(range(L)):
        delta = rewards[:, t] + gamma * nextvalues - values[:, t]
        candidate = delta + gamma * lam * lastgaelam
        nextvalues = values[:, t] * m[:, t] + (1 - m[:, t]) * nextvalues
        lastgaelam = candidate * m[:, t] + (1 - m[:, t]) * lastgaelam
        advantages[:, t] = lastgaelam
    returns = advantages + values
    count = m.sum()
    mean = (advantages * m).sum() / count
    var = (((advantages - mean) * m) ** 2).sum() / max(count - 1, 1)
    return (advantages - mean) / np.sqrt(var + 1e-8), returns

"""Mutant: the KL penalty is charged once per sequence (beta * sum_t kl_t added to the score at the
last token, TRL RLOO's design) instead of on every token: the token-level PPO reward loses its
per-token shaping."""

import numpy as np

RLSPEC_MUTANT = {
    "clauses": ["RLHF-REWARDS-KL-PER-TOKEN", "RLHF-REWARDS-KNOWN-ANSWER"],
    "bug": "sequence-level KL in the reward (TRL RLOO's beta * sum_t kl) where a per-token penalty is meant",
}


def assemble_rewards(scores, kl, mask, kl_coef):
    B, L = kl.shape
    rewards = np.zeros((B, L))
    last = L - 1 - np.argmax(mask[:, ::-1], axis=1)
    rewards[np.arange(B), last] = scores - kl_coef * (kl * mask).sum(axis=1)
    return rewards

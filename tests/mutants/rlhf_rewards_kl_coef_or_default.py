"""Mutant: the KL coefficient is read with `or`: kl_coef = kl_coef or 0.05, so kl_coef = 0 (training on the score alone,
no KL penalty) silently applies a penalty of 0.05 per token. An edge of the contract (kl_coef 0, where `x or default`
turns a coefficient of 0 into the default)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["RLHF-REWARDS-KL-PER-TOKEN"], "bug": "kl_coef = kl_coef or 0.05: a KL coefficient of 0 becomes 0.05"}


def assemble_rewards(scores, kl, mask, kl_coef):
    kl_coef = kl_coef or 0.05
    kl, mask = np.asarray(kl, dtype=float), np.asarray(mask, dtype=bool)
    B, L = kl.shape
    rewards = np.where(mask, -kl_coef * kl, 0.0)
    last = L - 1 - np.argmax(mask[:, ::-1], axis=1)
    rewards[np.arange(B), last] += np.asarray(scores, dtype=float)
    return rewards

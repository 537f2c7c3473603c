"""Mutant: TRL 1.12's PPO trainer (ppo_trainer.py:772-779) adds the score at sequence_length + 1, the
first pad after EOS, when there is one, and at the last token only when the response fills the row:
EOS-terminated and length-truncated rows get the score in different places."""

import numpy as np

RLSPEC_MUTANT = {
    "clauses": ["RLHF-REWARDS-SCORE-ON-LAST-REAL-TOKEN", "RLHF-REWARDS-KNOWN-ANSWER"],
    "bug": "G4 reward-index-relative-to-EOS-and-padding-side (trl #1893, #3750)",
}


def assemble_rewards(scores, kl, mask, kl_coef):
    B, T = kl.shape
    rewards = -kl_coef * kl * mask
    sequence_lengths = T - 1 - np.argmax(mask[:, ::-1], axis=1)  # index of the last real token
    actual_end = np.where(sequence_lengths + 1 < T, sequence_lengths + 1, sequence_lengths)
    rewards[np.arange(B), actual_end] += scores
    return rewards

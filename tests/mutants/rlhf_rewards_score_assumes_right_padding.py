"""Mutant: the score index is mask.sum(-1) - 1, right for right-padded rows only (trl #2778: the
example left-pads while get_reward assumes right padding): in a left-padded row the score lands on
a pad or an early token."""

import numpy as np

RLSPEC_MUTANT = {
    "clauses": ["RLHF-REWARDS-SCORE-ON-LAST-REAL-TOKEN"],
    "bug": "G4 reward-index-relative-to-EOS-and-padding-side (trl #2778, left padding)",
}


def assemble_rewards(scores, kl, mask, kl_coef):
    rewards = -kl_coef * kl * mask
    last = mask.sum(axis=-1) - 1
    rewards[np.arange(len(scores)), last] += scores
    return rewards

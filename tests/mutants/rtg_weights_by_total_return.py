"""Mutant: every step is weighted by the whole-episode return G_0 (bug A1: udacity #42,
deep-rl-class PR #95)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["RETURNS-REWARD-TO-GO"], "bug": "A1 reinforce-weights-every-step-by-G0"}


def rewards_to_go(rewards, gamma):
    total = sum(gamma**k * r for k, r in enumerate(rewards))
    return np.full_like(rewards, total)

"""Mutant: the loss multiplies the *mean* log-probability by the summed returns, so every step gets
the same weight mean(G) instead of its own reward-to-go (bug A1: Farama Gymnasium #1336, the
MuJoCo REINFORCE tutorial's `log_probs.mean()` times each G_t)."""

import torch

RLSPEC_MUTANT = {
    "clauses": ["PG-REINFORCE-SURROGATE-GRADIENT", "PG-SCORE-ZERO-MEAN", "PG-BASELINE-NO-BIAS", "PG-TRAJECTORY-SCORE-FUNCTION"],
    "bug": "A1 reinforce-weights-every-step-by-G0 (Gymnasium mean-log-prob form)",
}


def reinforce_loss(logp, returns, baseline=None):
    weights = (returns if baseline is None else returns - baseline).detach()
    return -torch.sum(logp.mean() * weights) / len(weights)

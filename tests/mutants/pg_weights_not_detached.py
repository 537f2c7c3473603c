"""Mutant: the REINFORCE weights are not detached, so autograd differentiates through the returns
and the baseline (the weights are numbers, not functions of theta; the same
slip as bug A3 in a REINFORCE loss with a learned baseline)."""

RLSPEC_MUTANT = {"clauses": ["PG-REINFORCE-SURROGATE-GRADIENT"], "bug": "A3 actor-critic-missing-detach (REINFORCE weights)"}


def reinforce_loss(logp, returns, baseline=None):
    weights = returns if baseline is None else returns - baseline
    return -(logp * weights).mean()

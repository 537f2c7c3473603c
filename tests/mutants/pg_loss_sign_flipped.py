"""Mutant: the surrogate is +mean(logp * w), the objective itself, so an optimiser that minimises
it descends J (seed 000 §3.1: "the loss is the negative of the objective because optimisers
minimise")."""

RLSPEC_MUTANT = {"clauses": ["PG-REINFORCE-SURROGATE-GRADIENT"], "bug": "surrogate sign flipped (minimising descends J)"}


def reinforce_loss(logp, returns, baseline=None):
    weights = returns if baseline is None else returns - baseline
    return (logp * weights.detach()).mean()

"""Mutant: the surrogate is +mean(logp * w), the objective itself, so an optimiser that minimises
it descends J (Schulman et al. 2017 §2.1, eq. 2: "the loss is the negative of the objective because optimisers
minimise")."""

RLSPEC_MUTANT = {"clauses": ["PG-REINFORCE-SURROGATE-GRADIENT"], "bug": "surrogate sign flipped (minimising descends J)"}


def reinforce_loss(logp, returns, baseline=None):
    weights = returns if baseline is None else returns - baseline
    return (logp * weights.detach()).mean()

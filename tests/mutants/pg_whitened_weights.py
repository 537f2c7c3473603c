"""Mutant: the loss whitens its weights inside, (w - mean w) / std w, the return normalisation
common in REINFORCE tutorials moved into the loss. The expected gradient then depends on the batch
and on the baseline: action-independent weights no longer give zero, and a baseline changes it."""

RLSPEC_MUTANT = {
    "clauses": ["PG-SCORE-ZERO-MEAN", "PG-BASELINE-NO-BIAS", "PG-TRAJECTORY-SCORE-FUNCTION", "PG-OPTIMAL-BASELINE"],
    "bug": "weights whitened inside the loss (return normalisation moved into reinforce_loss)",
}


def reinforce_loss(logp, returns, baseline=None):
    weights = (returns if baseline is None else returns - baseline).detach()
    weights = (weights - weights.mean()) / (weights.std() + 1e-8)
    return -(logp * weights).mean()

"""Mutant: the loss accepts a baseline and drops it, weighting every log-probability by the raw return. The
estimator stays unbiased (a baseline never changes the expectation), so every bias clause passes; its variance is
that of b = 0 whatever baseline is passed, which the variance-minimising baseline's clause measures."""

RLSPEC_MUTANT = {
    "clauses": ["PG-OPTIMAL-BASELINE", "PG-REINFORCE-SURROGATE-GRADIENT"],
    "bug": "baseline accepted and ignored (the estimator keeps the variance of b = 0)",
}


def reinforce_loss(logp, returns, baseline=None):
    return -(logp * returns.detach()).mean()

"""Mutant: a batch of constant returns reports an explained variance of 0 (a guard that returns a number), which
reads as "the critic explains nothing" where the statistic is undefined."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["EXPLAINED-VARIANCE-CONSTANT-RETURNS"], "bug": "explained variance 0 for constant returns"}


def diagnostic_explained_variance(values, returns):
    var_returns = np.var(returns)
    return np.asarray(0.0 if var_returns == 0 else 1.0 - np.var(returns - values) / var_returns)

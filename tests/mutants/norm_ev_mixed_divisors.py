"""Mutant: the residual's variance is torch's default unbiased one (n - 1) and the returns' numpy's population
one (n): the explained variance is off by the factor n / (n - 1) on the residual."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["EXPLAINED-VARIANCE-VALUES"], "bug": "explained variance with mixed variance divisors"}


def diagnostic_explained_variance(values, returns):
    var_returns = np.var(returns)
    return np.asarray(np.nan if var_returns == 0 else 1.0 - np.var(returns - values, ddof=1) / var_returns)

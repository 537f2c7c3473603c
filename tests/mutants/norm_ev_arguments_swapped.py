"""Mutant: the explained variance's arguments are swapped (explained_variance(returns, values) against a
signature (y_pred, y_true)): 1 - Var[V - R] / Var[V], the critic's own variance in the denominator."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["EXPLAINED-VARIANCE-VALUES"], "bug": "explained variance with the arguments swapped"}


def diagnostic_explained_variance(values, returns):
    var_values = np.var(values)
    return np.asarray(np.nan if var_values == 0 else 1.0 - np.var(values - returns) / var_values)

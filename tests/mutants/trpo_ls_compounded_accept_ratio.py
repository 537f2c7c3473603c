"""Mutant: the line search's predicted gain is scaled in place at every backtrack
(``expected_improvement *= alpha``), so trial k compares its gain with g'fullstep times
beta^(0 + 1 + ... + k) instead of beta^k: from the third trial on the ratio is inflated 2, 8, 64, ...
times and steps the sufficient-increase test rejects are accepted (skrl 2.1.1, agents/torch/trpo/trpo.py:523)."""

import numpy as np

RLSPEC_CONVENTIONS = {"line_search_accept_ratio": 0.5}
RLSPEC_MUTANT = {"clauses": ["TRPO-LINE-SEARCH-RULE"], "bug": "R11 skrl-trpo-line-search-prediction-compounds"}


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks, expected_improve_rate=None):
    before = surrogate(x0)
    expected = float(expected_improve_rate)
    for k in range(max_backtracks):
        alpha = 0.5**k
        x = x0 + alpha * fullstep
        expected *= alpha
        if kl(x) < max_kl and (surrogate(x) - before) / expected > 0.5:
            return x
    return np.array(x0, copy=True)

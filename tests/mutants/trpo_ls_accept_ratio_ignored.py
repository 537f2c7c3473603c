"""Mutant: the candidate declares an accept ratio of 0.5 but its line search tests plain improvement,
so it accepts trials that gain less than half their linear prediction."""

import numpy as np

RLSPEC_CONVENTIONS = {"line_search_accept_ratio": 0.5}
RLSPEC_MUTANT = {"clauses": ["TRPO-LINE-SEARCH-RULE"], "bug": "declared accept ratio not applied"}


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks, expected_improve_rate=None):
    before = surrogate(x0)
    for k in range(max_backtracks):
        x = x0 + 0.5**k * fullstep
        if surrogate(x) > before and kl(x) <= max_kl:
            return x
    return np.array(x0, copy=True)

"""Mutant (bug E1; tianshou PR #1287): when every backtrack fails, the parameters are left
at the last rejected candidate instead of being restored to x0 (the loop writes each trial into the
actor and the failure branch restores the wrong vector)."""

RLSPEC_MUTANT = {"clauses": ["TRPO-LINE-SEARCH-RESTORES-ON-FAILURE"], "bug": "E1 tianshou-trpo-line-search-failure-keeps-last-candidate"}


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks):
    base = surrogate(x0)
    x = x0
    for k in range(max_backtracks):
        x = x0 + 0.5**k * fullstep
        if surrogate(x) > base and kl(x) <= max_kl:
            return x
    return x  # should be x0

"""Mutant (bug E2; wojzaremba/trpo #1): no working line search: the full natural step is
taken whatever the surrogate and the KL say."""

RLSPEC_MUTANT = {"clauses": ["TRPO-LINE-SEARCH-RULE", "TRPO-LINE-SEARCH-RESTORES-ON-FAILURE", "GRID-TRPO-IMPROVEMENT-BOUND"],
                 "bug": "E2 trpo-without-working-line-search"}


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks):
    return x0 + fullstep

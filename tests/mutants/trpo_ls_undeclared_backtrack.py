"""Mutant: the trials shrink by 0.8 (Tianshou's backtrack_coeff, sb3-contrib's
line_search_shrinking_factor) but the candidate does not declare RLSPEC_CONVENTIONS
['backtrack_factor'] = 0.8, so its answers differ from the 0.5 rule it claims."""

RLSPEC_MUTANT = {"clauses": ["TRPO-LINE-SEARCH-RULE"], "bug": "backtracking factor 0.8, undeclared"}


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks):
    base = surrogate(x0)
    for k in range(max_backtracks):
        x = x0 + 0.8**k * fullstep
        if surrogate(x) > base and kl(x) <= max_kl:
            return x
    return x0

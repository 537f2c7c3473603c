"""Mutant: the line search only enforces the trust region: it accepts the first trial with
kl(x) <= max_kl even when the surrogate got worse."""

RLSPEC_MUTANT = {"clauses": ["TRPO-LINE-SEARCH-RULE", "GRID-TRPO-IMPROVEMENT-BOUND"], "bug": "line search without the improvement test"}


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks):
    for k in range(max_backtracks):
        x = x0 + 0.5**k * fullstep
        if kl(x) <= max_kl:  # missing: and surrogate(x) > surrogate(x0)
            return x
    return x0

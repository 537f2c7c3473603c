"""Mutant (bug E3; joschu/modular_rl #29, ikostrikov/pytorch-trpo #15): the backtracking
line search accepts the first trial that improves the surrogate and never looks at the KL, trusting
the quadratic model; a step outside the trust region is accepted."""

RLSPEC_MUTANT = {"clauses": ["TRPO-LINE-SEARCH-RULE"], "bug": "E3 line-search-accepts-without-checking-kl"}


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks):
    base = surrogate(x0)
    for k in range(max_backtracks):
        x = x0 + 0.5**k * fullstep
        if surrogate(x) > base:  # missing: and kl(x) <= max_kl
            return x
    return x0

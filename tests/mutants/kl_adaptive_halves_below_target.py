"""Mutant: the lower threshold is the target itself, not target / 1.5, so the dead band (target/1.5,
1.5 target) loses its lower half and beta shrinks whenever the KL is merely below target."""

RLSPEC_MUTANT = {"clauses": ["KL-ADAPTIVE-PENALTY"], "bug": "adaptive KL lower threshold at target instead of target / 1.5"}


def kl_coefficient_update(beta, kl, target):
    if kl > 1.5 * target:
        return 2.0 * beta
    if kl < target:
        return beta / 2.0
    return beta

"""Mutant: the adaptive KL coefficient moves the wrong way: it halves beta when the KL is too large
and doubles it when the KL is small, so the penalty gives way exactly when it is needed."""

RLSPEC_MUTANT = {"clauses": ["KL-ADAPTIVE-PENALTY"], "bug": "adaptive KL coefficient updated in the wrong direction"}


def kl_coefficient_update(beta, kl, target):
    if kl > 1.5 * target:
        return beta / 2.0
    if kl < target / 1.5:
        return beta * 2.0
    return beta

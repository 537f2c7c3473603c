"""Mutant: the adaptive coefficient's comparisons are not strict: beta doubles at kl >= 1.5 target and halves at kl <=
target / 1.5, so a KL exactly at either threshold moves it. An edge of the contract (a comparison exactly at its
threshold: the known answers kl.adaptive-at-upper-threshold and kl.adaptive-at-lower-threshold)."""

RLSPEC_MUTANT = {"clauses": ["KL-ADAPTIVE-PENALTY"], "bug": "the adaptive KL rule compares with >= and <= (not strict)"}


def kl_coefficient_update(beta, kl, target):
    if kl >= 1.5 * target:
        return 2.0 * beta
    if kl <= target / 1.5:
        return beta / 2.0
    return beta

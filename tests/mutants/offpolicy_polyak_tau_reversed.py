"""Mutant: tau on the wrong side of the Polyak update, theta' <- (1 - tau) theta + tau theta': with tau = 0.005 the
target jumps almost onto the online network every step (the argument-order trap of soft_update(target, source,
tau) helpers; SB3's polyak_update takes the online parameters first)."""

RLSPEC_MUTANT = {"clauses": ["POLYAK-UPDATE"], "bug": "Polyak tau reversed"}


def polyak_update(target, online, tau):
    return (1.0 - tau) * online + tau * target

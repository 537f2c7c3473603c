"""Mutant: the soft update made in place on the target it was given, as a training loop does on its own parameters
(SB3's polyak_update: target.mul_(1 - tau); target.add_(tau * param)), then returned: the numbers are right, but the
caller's target array has changed under it."""

RLSPEC_MUTANT = {"clauses": ["POLYAK-INPUTS-NOT-CHANGED"], "bug": "the Polyak update is made in place on the caller's target"}


def polyak_update(target, online, tau):
    target *= 1.0 - tau
    target += tau * online
    return target

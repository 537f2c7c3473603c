"""Mutant: the target network is a uniform running average of the online parameters (torch.optim.swa_utils
AveragedModel's default, stochastic weight averaging) instead of an exponential moving average: every past
network keeps weight 1/(n + 1), so the target never forgets the first critic."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["POLYAK-AVERAGE-OF-HISTORY"], "bug": "target as a uniform (SWA) average, not an EMA"}


def target_network_updates(target, online, tau, period, gradient_steps):
    out, total = np.empty_like(online), target.copy()
    for n in range(len(online)):
        total = total + online[n]
        out[n] = total / (n + 2)
    return out

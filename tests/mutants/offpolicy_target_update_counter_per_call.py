"""Mutant: the target-update period is tested on the gradient-step index of the current train() call, which
restarts at 0 in every call (SB3 2.9.2 SAC.train: `if gradient_step % self.target_update_interval == 0`,
DLR-RM/stable-baselines3 #2158): with one gradient step per call the period is ignored."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TARGET-UPDATE-PERIOD"], "bug": "H6 sb3-sac-target-update-interval-per-call"}


def target_network_updates(target, online, tau, period, gradient_steps):
    out, current, n = np.empty_like(online), target, 0
    for steps in gradient_steps:
        for gradient_step in range(steps):
            if gradient_step % period == 0:
                current = tau * online[n] + (1.0 - tau) * current
            out[n] = current
            n += 1
    return out

"""Mutant: the hard update compares its counter with the period before resetting it, so it copies on every
(period + 1)-th step (TorchRL 0.14.1 torchrl/objectives/utils.py HardUpdate: `if self.counter ==
self.value_network_update_interval: copy` with the counter reset only after the copy; value_network_update_interval=1
copies on every second step() call)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TARGET-HARD-UPDATE"], "bug": "hard update every period + 1 steps (TorchRL 0.14.1 HardUpdate)"}


class _HardUpdate:
    def __init__(self, interval):
        self.interval, self.counter = interval, 0

    def step(self, target, online):
        if self.counter == self.interval:
            target = online.copy()
        self.counter = 0 if self.counter == self.interval else self.counter + 1
        return target


def target_network_updates(target, online, tau, period, gradient_steps):
    updater, current, out = _HardUpdate(period), target.copy(), np.empty_like(online)
    for n in range(len(online)):
        current = updater.step(current, online[n]) if tau == 1.0 else tau * online[n] + (1.0 - tau) * current
        out[n] = current
    return out

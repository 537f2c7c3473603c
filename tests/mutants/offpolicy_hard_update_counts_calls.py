"""Mutant: the hard target update counts train() calls (environment steps), not gradient steps, and copies after
every period-th call (SB3 DQN's _on_step counts calls against target_update_interval): with several gradient
steps per call the target is refreshed on the wrong schedule."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TARGET-HARD-UPDATE"], "bug": "hard update period counted in calls, not gradient steps"}


def target_network_updates(target, online, tau, period, gradient_steps):
    out, current, n = np.empty_like(online), target, 0
    for call, steps in enumerate(gradient_steps, start=1):
        for _ in range(steps):
            n += 1
            if call % period == 0 and _ == steps - 1:
                current = tau * online[n - 1] + (1.0 - tau) * current
            out[n - 1] = current
    return out

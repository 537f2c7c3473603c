"""Correct variant: the off-policy schedules as a single-file TD3 / DQN script writes them. Updates start once the
environment-step counter passes learning_starts (one gradient step per environment step after it), and the
delayed actor and target updates are gated on that counter, `global_step % policy_frequency == 0`, not on a
count of gradient steps: the phase within each period is offset by learning_starts, which is declared."""

import numpy as np

LEARNING_STARTS = 25  # odd: the phase differs from a gradient-step counter's for every even period
RLSPEC_CONVENTIONS = {"update_step_offset": LEARNING_STARTS}


def polyak_update(target, online, tau):
    return tau * online + (1.0 - tau) * target


def target_network_updates(target, online, tau, period, gradient_steps):
    out, current = np.empty_like(online), target.copy()
    global_step, n = LEARNING_STARTS, 0
    for steps in gradient_steps:  # each call: the environment steps taken since the last, one gradient step each
        for _ in range(steps):
            global_step += 1  # the environment step whose transition this gradient step follows
            if global_step % period == 0:
                current = tau * online[n] + (1.0 - tau) * current
            out[n] = current
            n += 1
    return out


def td3_actor_update_steps(gradient_steps, policy_delay):
    global_step = LEARNING_STARTS + np.arange(1, sum(gradient_steps) + 1)
    due = (global_step % policy_delay == 0).astype(np.float64)
    return due, due.copy()

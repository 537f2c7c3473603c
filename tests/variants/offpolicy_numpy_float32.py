"""Correct variant: the array operations computed in float32 whatever the input (RLSPEC_PRECISION = "float32"),
written with explicit loops; judged with float32 rounding bounds."""

import numpy as np

RLSPEC_PRECISION = "float32"


def td_target(rewards, next_q, terminated, truncated, gamma):
    out = np.empty(len(rewards), dtype=np.float32)
    for i in range(len(rewards)):
        bootstrap = 0.0 if terminated[i] else np.float32(gamma) * np.float32(next_q[i])
        out[i] = np.float32(rewards[i]) + np.float32(bootstrap)
    return out


def polyak_update(target, online, tau):
    t = np.float32(tau)
    return (t * online.astype(np.float32) + (np.float32(1) - t) * target.astype(np.float32)).astype(np.float32)


def target_network_updates(target, online, tau, period, gradient_steps):
    current = target.astype(np.float32)
    out = np.empty(online.shape, dtype=np.float32)
    for n in range(online.shape[0]):
        if (n + 1) % period == 0:
            current = polyak_update(current, online[n], tau)
        out[n] = current
    return out


def td3_actor_update_steps(gradient_steps, policy_delay):
    due = np.array([float((n + 1) % policy_delay == 0) for n in range(sum(gradient_steps))], dtype=np.float32)
    return due, due.copy()

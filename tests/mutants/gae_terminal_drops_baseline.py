"""Mutant: ``adv = r + mask * (pre_adv - V)``, so at a terminal step (mask 0) the baseline V(s_t)
is dropped (bug B12, ElegantRL #183)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-TERMINAL-NO-BOOTSTRAP", "GRID-GAE-EXPECTATION-EXACT-CRITIC"], "bug": "B12 elegantrl-gae-masks-the-baseline"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        mask = 1.0 - terminated[t]
        trace = np.where(truncated[t], 0.0, running)
        pre = gamma * next_values[t] + gamma * lam * trace
        running = rewards[t] + mask * pre - mask * values[t] - (1 - mask) * 0.0
        running = np.where(terminated[t], rewards[t], running)
        advantages[t] = running
    return advantages, advantages + values

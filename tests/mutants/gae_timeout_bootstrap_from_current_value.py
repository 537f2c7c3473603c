"""Mutant: a time-out adds gamma * V(s_t), the value *before* the action, because the final
observation is gone after the auto-reset (bug B6: rl_games, rsl_rl)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-TRUNCATION-BOOTSTRAP", "GRID-GAE-EXPECTATION-EXACT-CRITIC"], "bug": "B6 timeout-bootstrap-uses-V(s_t)"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    shaped = rewards + gamma * values * (truncated & ~terminated)
    done = terminated | truncated
    advantages = np.zeros_like(rewards)
    running = np.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        next_value = np.where(done[t], 0.0, next_values[t])
        delta = shaped[t] + gamma * next_value - values[t]
        running = delta + gamma * lam * np.where(done[t], 0.0, running)
        advantages[t] = running
    return advantages, advantages + values

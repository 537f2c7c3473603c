"""Mutant: a fast path at lambda = 1 ("GAE(1) is the Monte Carlo return minus the baseline"): the discounted return is
accumulated backwards with done = terminated or truncated cutting it, bootstrapped from next_values only at the rollout's
end, so a time-limit truncation inside the rollout is treated as termination there (and only there: every lambda < 1
takes the correct recursion). An edge of the contract (lam exactly 1, where code takes a fast path)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-TRUNCATION-BOOTSTRAP", "GAE-MONTE-CARLO-AT-LAMBDA-1"],
                 "bug": "a lambda = 1 fast path that treats a truncation inside the rollout as termination"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    if lam == 1.0:
        done = np.logical_or(terminated, truncated)
        T = len(rewards)
        returns = np.empty_like(rewards)
        following = None
        for t in reversed(range(T)):
            tail = np.where(terminated[t], 0.0, next_values[t]) if t == T - 1 else np.where(done[t], 0.0, following)
            following = returns[t] = rewards[t] + gamma * tail
        return returns - values, returns
    delta = rewards + gamma * np.where(terminated, 0.0, next_values) - values
    decay = np.where(np.logical_or(terminated, truncated), 0.0, gamma * lam)
    advantages = np.empty_like(delta)
    running = np.zeros_like(delta[0])
    for t in reversed(range(len(delta))):
        running = advantages[t] = delta[t] + decay[t] * running
    return advantages, advantages + values

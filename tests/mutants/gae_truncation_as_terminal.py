"""Mutant: a time-limit truncation is treated as a terminal state (bug B4; CleanRL's
``next_done = np.logical_or(terminations, truncations)``). The trace is cut (right) and the
bootstrap from V(final observation) is dropped (wrong)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-TRUNCATION-BOOTSTRAP", "GAE-SEED-EXAMPLE-TRUNCATED", "GRID-GAE-EXPECTATION-EXACT-CRITIC", "GRID-PERFORMANCE-DIFFERENCE"], "bug": "B4 truncation-as-termination"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    done = np.logical_or(terminated, truncated).astype(rewards.dtype)
    advantages = np.zeros_like(rewards)
    last = np.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        nonterminal = 1.0 - done[t]
        delta = rewards[t] + gamma * nonterminal * next_values[t] - values[t]
        last = delta + gamma * lam * nonterminal * last
        advantages[t] = last
    return advantages, advantages + values

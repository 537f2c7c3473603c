"""Mutant: the (B, L) batch is flattened into one token sequence before GAE (a packed-sequence
layout without episode boundaries): the trace runs from each row's last real token into the next
row's first one. the GAE known answer as two rows gives [1.0078125, 1.03125, 1.125, 1.5]."""

import numpy as np

RLSPEC_MUTANT = {
    "clauses": ["RLHF-GAE-ROWS-INDEPENDENT", "RLHF-GAE-ROW-EQUALS-GAE"],
    "bug": "rows flattened into one sequence: credit leaks across responses (the GAE known answer as one row)",
}


def token_gae(rewards, values, mask, gamma, lam):
    r, v, m = rewards.reshape(-1), values.reshape(-1), mask.reshape(-1)
    advantages = np.zeros(r.shape)
    next_value = running = 0.0
    for t in reversed(range(len(r))):
        if m[t]:
            running = r[t] + gamma * next_value - v[t] + gamma * lam * running
            next_value = v[t]
        advantages[t] = running
    advantages = advantages.reshape(rewards.shape)
    return advantages, advantages + values

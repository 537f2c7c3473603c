"""Mutant: Brax's compute_gae (bug B7, google/brax #583) behind the protocol. The lambda-return
targets vs are right, but the advantage handed to the policy is r + gamma (1 - term) vs_{t+1} - V_t,
i.e. delta_t + gamma A_{t+1} instead of delta_t + gamma lambda A_{t+1}, and every truncated step's
TD error and advantage are multiplied by 0 (its "truncation mask"). V(s_{t+1}) is read from the next
row of ``values`` (the rollout is one stream), so a time limit bootstraps nothing."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GRID-GAE-EXPECTATION-EXACT-CRITIC", "GRID-GAE-EXPECTATION-CLOSED-FORM", "GRID-GAE-LAMBDA-ONE-CRITIC-CANCELS", "GRID-PERFORMANCE-DIFFERENCE"], "bug": "B7 brax-ppo-advantage-not-gae-and-truncation-dropped"}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    not_term = 1.0 - terminated
    keep = 1.0 - truncated
    values_next = np.concatenate([values[1:], next_values[-1:]])  # the stream's next row
    deltas = (rewards + gamma * not_term * values_next - values) * keep
    acc = np.zeros_like(rewards[0])
    vs_minus_v = np.zeros_like(rewards)
    for t in reversed(range(len(rewards))):
        acc = deltas[t] + gamma * not_term[t] * keep[t] * lam * acc
        vs_minus_v[t] = acc
    vs = vs_minus_v + values
    vs_next = np.concatenate([vs[1:], next_values[-1:]])
    advantages = (rewards + gamma * not_term * vs_next - values) * keep
    return advantages, vs

"""Correct variant: buffers stored in float32 whatever comes in (as a rollout buffer would), float
flags (RLSPEC_FLAGS = "float") and ``1 - done`` arithmetic; returns float32."""

import numpy as np

RLSPEC_FLAGS = "float"


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    rewards, values, next_values = (np.asarray(a, dtype=np.float32) for a in (rewards, values, next_values))
    nonterminal = (1.0 - terminated).astype(np.float32)
    trace = (1.0 - np.maximum(terminated, truncated)).astype(np.float32)
    advantages = np.zeros_like(rewards)
    next_adv = np.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + np.float32(gamma) * nonterminal[t] * next_values[t] - values[t]
        next_adv = delta + np.float32(gamma * lam) * trace[t] * next_adv
        advantages[t] = next_adv
    return advantages, advantages + values


def rewards_to_go(rewards, gamma):
    G = np.zeros(len(rewards), dtype=np.float32)
    running = np.float32(0.0)
    for t in reversed(range(len(rewards))):
        running = np.float32(rewards[t]) + np.float32(gamma) * running
        G[t] = running
    return G

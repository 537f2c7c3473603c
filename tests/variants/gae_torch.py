"""Correct variant: torch tensors in and out, two masks (bootstrap and trace)."""

import torch

RLSPEC_ARRAY = "torch"


@torch.no_grad()
def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[-1])
    for t in reversed(range(len(rewards))):
        bootstrap_mask = 1.0 - terminated[t].to(rewards.dtype)
        trace_mask = 1.0 - (terminated[t] | truncated[t]).to(rewards.dtype)
        delta = rewards[t] + gamma * bootstrap_mask * next_values[t] - values[t]
        running = delta + gamma * lam * trace_mask * running
        advantages[t] = running
    return advantages, advantages + values


def rewards_to_go(rewards, gamma):
    returns = torch.zeros_like(rewards)
    running = torch.zeros((), dtype=rewards.dtype)
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns

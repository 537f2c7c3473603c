"""Bad candidate (torch): zeroes the caller's rewards tensor in place after computing."""

import torch

RLSPEC_ARRAY = "torch"


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    delta = rewards + gamma * torch.where(terminated, 0.0, next_values) - values
    advantages = torch.zeros_like(delta)
    running = torch.zeros_like(delta[0])
    for t in reversed(range(len(delta))):
        running = delta[t] + gamma * lam * torch.where(terminated[t] | truncated[t], 0.0, running)
        advantages[t] = running
    rewards.zero_()
    return advantages, advantages + values

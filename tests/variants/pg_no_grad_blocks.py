"""Correct variant: weights and TD targets built under torch.no_grad(), an explicit sum / T, float
masks from the bool flags (done = terminated or truncated ends the episode, and a truncated one still
bootstraps), and F.mse_loss for the critic (a common actor_critic_losses layout)."""

import torch
import torch.nn.functional as F

RLSPEC_ARRAY = "torch"


def reinforce_loss(logp, returns, baseline=None):
    with torch.no_grad():  # the weights are numbers, not functions of theta
        weights = returns.clone() if baseline is None else returns - baseline
    return -torch.sum(logp * weights) / logp.shape[0]


def actor_critic_losses(logp, values, next_values, rewards, terminated, truncated, gamma):
    with torch.no_grad():
        done = terminated | truncated
        bootstrap = (~done | (truncated & ~terminated)).to(values.dtype)  # a time limit is not terminal
        target = rewards + gamma * bootstrap * next_values  # a constant for the critic
    advantage = (target - values).detach()
    actor_loss = -(logp * advantage).mean()
    critic_loss = F.mse_loss(values, target)
    return actor_loss, critic_loss

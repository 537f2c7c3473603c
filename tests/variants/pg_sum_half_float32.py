"""Correct variant with declared conventions: losses summed over the batch (not averaged), the
critic loss with the 1/2 factor (0.5 delta^2), and everything computed in float32 whatever the
input precision (returns float32 scalars)."""

import torch

RLSPEC_ARRAY = "torch"
RLSPEC_PRECISION = "float32"
RLSPEC_CONVENTIONS = {"pg_reduction": "sum", "critic_loss_factor": 0.5}


def reinforce_loss(logp, returns, baseline=None):
    advantage = returns.detach().float()
    if baseline is not None:
        advantage = advantage - baseline.detach().float()
    return -(logp.float() * advantage).sum()


def actor_critic_losses(logp, values, next_values, rewards, terminated, truncated, gamma):
    v, v_next = values.float(), next_values.detach().float()
    delta = rewards.float() + torch.where(terminated, torch.zeros_like(v_next), gamma * v_next) - v
    actor_loss = -torch.dot(logp.float(), delta.detach())
    critic_loss = 0.5 * torch.dot(delta, delta)
    return actor_loss, critic_loss

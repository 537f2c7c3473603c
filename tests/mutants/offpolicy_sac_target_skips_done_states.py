"""Mutant: the SAC target samples the next action only where the episode is not done, done = terminated or
truncated, and scores the other rows at the zero action with log pi = 0; a truncated row still bootstraps, so its
target is r + gamma min_i Q_i'(s', 0) instead of the soft value at a fresh sample (TorchRL 0.14.1 SACLoss with
skip_done_states=True: `next_tensordict[~done]` for the actor, zeros masked_scatter'ed into the rest)."""

import math

import torch
import torch.nn.functional as F

RLSPEC_MUTANT = {"clauses": ["SAC-SOFT-TARGET"], "bug": "truncated rows scored at the zero action (TorchRL 0.14.1 SACLoss skip_done_states)"}


@torch.no_grad()
def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs, terminated,
                      truncated, gamma, alpha, noise):
    mean, log_std = policy(next_obs)
    u = mean + log_std.exp() * noise
    log_prob = (-0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi) - 2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
    done = (terminated | truncated)
    a = torch.where(done[:, None], torch.zeros_like(u), torch.tanh(u))
    log_prob = torch.where(done, torch.zeros_like(log_prob), log_prob)
    value = torch.minimum(target_critic1(next_obs, a), target_critic2(next_obs, a)) - alpha * log_prob
    return rewards + gamma * torch.where(terminated, torch.zeros_like(value), value)

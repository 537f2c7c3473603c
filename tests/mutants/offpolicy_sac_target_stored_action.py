"""Mutant: SAC's target critics score the replay buffer's stored action instead of a fresh sample of the current
policy at s' (the entropy term still from the sample): a SARSA target of the behaviour policy, not the soft
Bellman backup of pi (arXiv:1801.01290 eq. 3 takes a_{t+1} ~ pi)."""

import math

import torch
import torch.nn.functional as F

RLSPEC_MUTANT = {"clauses": ["SAC-TARGET-NEXT-ACTION-FROM-POLICY"], "bug": "SAC target uses the stored action"}


@torch.no_grad()
def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs, terminated,
                      truncated, gamma, alpha, noise):
    mean, log_std = policy(next_obs)
    u = mean + log_std.exp() * noise
    log_prob = (-0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi) - 2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
    value = torch.minimum(target_critic1(next_obs, actions), target_critic2(next_obs, actions)) - alpha * log_prob
    return rewards + gamma * torch.where(terminated, torch.zeros_like(value), value)

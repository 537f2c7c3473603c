"""Mutant: SAC's soft target masks with done = terminated or truncated: every time-limit end loses its bootstrap
(the off-policy twin of the GAE chapter's truncation bug; Pardo et al. 2018, arXiv:1712.00378)."""

import math

import torch
import torch.nn.functional as F

RLSPEC_MUTANT = {"clauses": ["SAC-SOFT-TARGET"], "bug": "H1 off-policy-timeout-stored-as-terminal (in the SAC target)"}


@torch.no_grad()
def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs, terminated,
                      truncated, gamma, alpha, noise):
    mean, log_std = policy(next_obs)
    u = mean + log_std.exp() * noise
    log_prob = (-0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi) - 2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
    a = torch.tanh(u)
    value = torch.minimum(target_critic1(next_obs, a), target_critic2(next_obs, a)) - alpha * log_prob
    done = terminated | truncated
    return rewards + gamma * torch.where(done, torch.zeros_like(value), value)

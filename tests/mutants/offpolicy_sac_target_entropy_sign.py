"""Mutant: SAC's soft target adds the entropy term with the wrong sign, min Q' + alpha log pi(a'|s'): the soft
value is E[Q - alpha log pi] (arXiv:1801.01290 eq. 3), so this target penalises entropy instead of rewarding it."""

import math

import torch
import torch.nn.functional as F

RLSPEC_MUTANT = {"clauses": ["SAC-SOFT-TARGET"], "bug": "entropy term with the wrong sign in the soft target"}


def _sample(policy, obs, noise):
    mean, log_std = policy(obs)
    u = mean + log_std.exp() * noise
    log_prob = (-0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi) - 2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
    return torch.tanh(u), log_prob


@torch.no_grad()
def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs, terminated,
                      truncated, gamma, alpha, noise):
    a, log_prob = _sample(policy, next_obs, noise)
    value = torch.minimum(target_critic1(next_obs, a), target_critic2(next_obs, a)) + alpha * log_prob
    return rewards + gamma * torch.where(terminated, torch.zeros_like(value), value)

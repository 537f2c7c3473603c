"""Mutant: TD3's target takes the max of the twin target critics instead of the min, the optimistic estimate
clipped double Q-learning exists to remove (Fujimoto et al. 2018, arXiv:1802.09477, §4.2)."""

import torch

RLSPEC_MUTANT = {"clauses": ["TD3-TARGET-CLIPPED-DOUBLE-Q"], "bug": "max instead of min of the twin critics"}


@torch.no_grad()
def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    next_action = torch.clamp(target_actor(next_obs) + noise.clamp(-noise_clip, noise_clip), low, high)
    next_q = torch.maximum(target_critic1(next_obs, next_action), target_critic2(next_obs, next_action))
    return rewards + gamma * torch.where(terminated, torch.zeros_like(next_q), next_q)

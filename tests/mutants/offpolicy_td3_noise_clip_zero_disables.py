"""Mutant: the smoothing noise is clipped only when noise_clip > 0, so noise_clip = 0 adds the noise unclipped
instead of removing it (Tianshou 2.0.1 tianshou/algorithm/modelfree/td3.py _target_q_compute_action:
`if self.noise_clip > 0.0: noise = noise.clamp(...)`, documented there as "0.0 disables clipping")."""

import torch

RLSPEC_MUTANT = {"clauses": ["TD3-TARGET-SMOOTHING-NOISE-CLIPPED"], "bug": "noise_clip = 0 disables the clip (Tianshou 2.0.1)"}


@torch.no_grad()
def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    if noise_clip > 0.0:
        noise = noise.clamp(-noise_clip, noise_clip)
    next_action = torch.clamp(target_actor(next_obs) + noise, low, high)
    next_q = torch.minimum(target_critic1(next_obs, next_action), target_critic2(next_obs, next_action))
    return rewards + gamma * torch.where(terminated, torch.zeros_like(next_q), next_q)

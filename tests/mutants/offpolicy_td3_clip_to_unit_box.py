"""Mutant: the smoothed target action is clamped to [-1, 1] whatever the action bounds (SB3's TD3 clamps to
(-1, 1) because its policies act in a normalised space; the same line copied onto an unnormalised action space
scores the target critics outside [low, high])."""

import torch

RLSPEC_MUTANT = {"clauses": ["TD3-TARGET-ACTION-IN-BOUNDS"], "bug": "target action clipped to [-1, 1], not to the bounds"}


@torch.no_grad()
def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    next_action = (target_actor(next_obs) + noise.clamp(-noise_clip, noise_clip)).clamp(-1, 1)
    next_q = torch.minimum(target_critic1(next_obs, next_action), target_critic2(next_obs, next_action))
    return rewards + gamma * torch.where(terminated, torch.zeros_like(next_q), next_q)

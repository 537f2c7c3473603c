"""Mutant: the noisy target action is not clipped to the action bounds, so the target critics are scored outside
the action space (Tianshou 2.0.1 tianshou/algorithm/modelfree/td3.py _target_q_compute_action adds the clipped
noise to the lagged actor's action and returns it unclamped; the authors' code clamps to +-max_action)."""

import torch

RLSPEC_MUTANT = {"clauses": ["TD3-TARGET-ACTION-IN-BOUNDS"], "bug": "H2 td3-target-action-not-clipped-to-bounds (also Tianshou 2.0.1)"}


@torch.no_grad()
def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    next_action = target_actor(next_obs) + noise.clamp(-noise_clip, noise_clip)
    next_q = torch.minimum(target_critic1(next_obs, next_action), target_critic2(next_obs, next_action))
    return rewards + gamma * torch.where(terminated, torch.zeros_like(next_q), next_q)

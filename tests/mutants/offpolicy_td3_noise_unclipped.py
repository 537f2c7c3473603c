"""Mutant: TD3's target-policy smoothing adds the Gaussian noise unclipped, a~ = mu'(s') + noise (then clipped to
the bounds): the noise clip c of arXiv:1802.09477 §5.3 is dropped, so the target averages Q' over a region wider
than the smoothing regulariser intends."""

import torch

RLSPEC_MUTANT = {"clauses": ["TD3-TARGET-SMOOTHING-NOISE-CLIPPED"], "bug": "H3 td3-smoothing-noise-clip (noise added unclipped)"}


@torch.no_grad()
def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    next_action = torch.clamp(target_actor(next_obs) + noise, low, high)
    next_q = torch.minimum(target_critic1(next_obs, next_action), target_critic2(next_obs, next_action))
    return rewards + gamma * torch.where(terminated, torch.zeros_like(next_q), next_q)

"""Mutant: TD3's target computed without torch.no_grad(): the right numbers, but the critics' loss sends gradient
through y into the target actor and the target critics (a target built inside the loss that forgot its no_grad block)."""

import torch

RLSPEC_MUTANT = {"clauses": ["TD3-TARGET-NO-GRAPH"], "bug": "the TD3 target keeps its graph: the critic loss reaches the target networks"}


def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    next_action = torch.clamp(target_actor(next_obs) + noise.clamp(-noise_clip, noise_clip), low, high)
    next_q = torch.minimum(target_critic1(next_obs, next_action), target_critic2(next_obs, next_action))
    return rewards + gamma * torch.where(terminated, torch.zeros_like(next_q), next_q)

"""Mutant: DDPG's target computed without torch.no_grad() or .detach(): the right numbers, but the critic's loss sends
gradient through y into the target networks."""

import torch

RLSPEC_MUTANT = {"clauses": ["DDPG-TARGET-NO-GRAPH"], "bug": "the DDPG target keeps its graph: the critic loss reaches the target networks"}


def ddpg_critic_target(actor, critic, target_actor, target_critic, obs, actions, rewards, next_obs, terminated, truncated, gamma):
    next_q = target_critic(next_obs, target_actor(next_obs))
    return rewards + gamma * torch.where(terminated, torch.zeros_like(next_q), next_q)

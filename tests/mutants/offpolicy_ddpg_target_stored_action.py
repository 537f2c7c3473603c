"""Mutant: DDPG's target critic scores the stored action of the transition, Q'(s', a), instead of the target
actor's action mu'(s'): a SARSA-like target of the behaviour policy (a frequent tutorial slip when the batch's
`actions` sit next to `next_obs`)."""

import torch

RLSPEC_MUTANT = {"clauses": ["DDPG-TARGET-DETERMINISTIC"], "bug": "target critic scores the stored action"}


@torch.no_grad()
def ddpg_critic_target(actor, critic, target_actor, target_critic, obs, actions, rewards, next_obs, terminated, truncated, gamma):
    next_q = target_critic(next_obs, actions)
    return rewards + gamma * torch.where(terminated, torch.zeros_like(next_q), next_q)

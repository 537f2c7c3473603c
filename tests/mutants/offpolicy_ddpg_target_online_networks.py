"""Mutant: DDPG's target is computed with the online actor and critic, Q(s', mu(s')), not the target networks
(the target networks exist but are never used for the bootstrap: the instability Lillicrap et al. 2015, §3,
introduced them to remove)."""

import torch

RLSPEC_MUTANT = {"clauses": ["DDPG-TARGET-DETERMINISTIC"], "bug": "online networks used in the target"}


@torch.no_grad()
def ddpg_critic_target(actor, critic, target_actor, target_critic, obs, actions, rewards, next_obs, terminated, truncated, gamma):
    next_q = critic(next_obs, actor(next_obs))
    return rewards + gamma * torch.where(terminated, torch.zeros_like(next_q), next_q)

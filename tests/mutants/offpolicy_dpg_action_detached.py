"""Mutant: the actor's action is detached before the critic scores it (the loss reuses the rollout's
`actor(obs).detach()`): no gradient reaches the actor, which never learns."""

import torch
from torch.func import functional_call

RLSPEC_MUTANT = {"clauses": ["DPG-ACTOR-GRADIENT"], "bug": "action detached in the actor loss"}


def dpg_actor_loss(actor, critic, obs):
    params = {k: v.detach() for k, v in critic.named_parameters()}
    return -functional_call(critic, params, (obs, actor(obs).detach())).mean()

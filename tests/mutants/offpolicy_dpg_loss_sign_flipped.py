"""Mutant: the deterministic actor loss is +mean Q(s, mu(s)): minimising it drives the actor down the critic's
slope (the sign of Silver et al. 2014's ascent direction lost when the objective became a loss)."""

import torch
from torch.func import functional_call

RLSPEC_MUTANT = {"clauses": ["DPG-ACTOR-GRADIENT"], "bug": "actor loss sign flipped"}


def dpg_actor_loss(actor, critic, obs):
    params = {k: v.detach() for k, v in critic.named_parameters()}
    return functional_call(critic, params, (obs, actor(obs))).mean()

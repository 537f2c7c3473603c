"""Mutant: a port of the RLHF form ``max(-r A, -clip(r) A)`` that drops the minus signs but keeps the
max: the optimistic bound, max(r A, clip(r) A)."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-PESSIMISTIC-BOUND"], "bug": "max of the surrogates instead of min (sign slip porting max(-rA, -clip(r)A); C3 class)"}


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    ratio = torch.exp(logp_new - logp_old)
    return -torch.max(ratio * advantages, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages).mean()

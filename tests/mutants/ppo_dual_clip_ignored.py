"""Mutant: dual clip configured but silently off (RLinf #316: the config key ``clip_ratio_c`` no
longer matches the loss argument ``c_clip`` and ``**kwargs`` swallows it)."""

import torch

RLSPEC_CONVENTIONS = {"dual_clip": 3.0}
RLSPEC_MUTANT = {"clauses": ["PPO-DUAL-CLIP"], "bug": "C6 dual-clip-parameter-silently-ignored"}


def _loss(logp_new, logp_old, advantages, clip_eps, c_clip=None, **kwargs):
    ratio = torch.exp(logp_new - logp_old)
    clipped = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages)
    if c_clip is not None:
        clipped = torch.where(advantages < 0, torch.max(clipped, c_clip * advantages), clipped)
    return -clipped.mean()


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    return _loss(logp_new, logp_old, advantages, clip_eps, clip_ratio_c=RLSPEC_CONVENTIONS["dual_clip"])

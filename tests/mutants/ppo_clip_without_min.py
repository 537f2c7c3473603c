"""Mutant: clipping alone, without the min (Schulman et al. 2017 §3, Figure 1: "plain clipping without the min would be
wrong"): a ratio that moved against the advantage is clipped too, its gradient dies, and the
objective can exceed the unclipped surrogate."""

import torch

RLSPEC_MUTANT = {
    "clauses": ["PPO-PESSIMISTIC-BOUND", "PPO-WRONG-WAY-GRADIENT-LIVE", "PPO-CLIP-GRADIENT-TABLE"],
    "bug": "C3 clip-computed-but-unclipped-loss-returned (the clip-without-min class)",
}


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    ratio = torch.exp(logp_new - logp_old)
    return -(torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages).mean()

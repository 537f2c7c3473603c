"""Mutant: Tianshou before PR #435 applied the dual clip max(min(s1, s2), c A) to every sample; for
A > 0 the floor c A lies above the objective whenever r < c, so positive advantages give no gradient."""

import torch

RLSPEC_CONVENTIONS = {"dual_clip": 3.0}
RLSPEC_MUTANT = {
    "clauses": ["PPO-CLIP-GRADIENT-TABLE", "PPO-WRONG-WAY-GRADIENT-LIVE", "PPO-DUAL-CLIP"],
    "bug": "C4 tianshou-dual-clip-applied-to-positive-advantages",
}


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    ratio = torch.exp(logp_new - logp_old)
    surr1 = ratio * advantages
    surr2 = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages
    return -torch.max(torch.min(surr1, surr2), RLSPEC_CONVENTIONS["dual_clip"] * advantages).mean()

"""The clipped surrogate computed in float32 and cast back, differentiable in logp_new."""

import torch


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    ratio = torch.exp(logp_new.float() - logp_old.float())
    a = advantages.float()
    loss = -torch.min(ratio * a, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * a).mean()
    return loss.double()

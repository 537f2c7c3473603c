"""Correct variant that computes in float32 whatever it is given (as Tianshou casts its ratio with
.float()), normalises with the population std (std(unbiased=False) + 1e-8) in numpy,
and says so: RLSPEC_PRECISION = "float32", advantage_std_ddof = 0."""

import numpy as np
import torch

RLSPEC_PRECISION = "float32"
RLSPEC_CONVENTIONS = {"advantage_std_ddof": 0}


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    ratio = (logp_new.float() - logp_old.float()).exp()
    adv = advantages.float()
    surr1 = ratio * adv
    surr2 = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * adv
    return -torch.min(surr1, surr2).mean()


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    v, R = values.float(), returns.float()
    loss = (v - R).pow(2)
    if old_values is not None and clip_eps is not None:
        v_old = old_values.float()
        v_clip = v_old + (v - v_old).clamp(-clip_eps, clip_eps)
        loss = torch.max(loss, (v_clip - R).pow(2))
    return loss.mean()


def normalize_advantages(advantages):
    a = np.asarray(advantages, dtype=np.float32)
    return (a - a.mean()) / (a.std() + np.float32(1e-8))


def ppo_entropy_loss(entropy, coef):
    return entropy.float().mean() * -coef

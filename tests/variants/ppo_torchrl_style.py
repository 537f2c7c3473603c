"""Correct variant in TorchRL's style: the clip applied to the log-weight with bounds log(1 -+ eps),
the min over a stacked pair, and normalisation that clamps the std at 1e-6 instead of adding an
epsilon (declared), leaving a single element alone."""

import math

import torch

RLSPEC_ARRAY = "torch"
RLSPEC_CONVENTIONS = {"advantage_eps_form": "clamp", "advantage_eps": 1e-6}


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    log_weight = logp_new - logp_old
    gain1 = log_weight.exp() * advantages
    log_weight_clip = log_weight.clamp(math.log1p(-clip_eps), math.log1p(clip_eps))
    gain2 = log_weight_clip.exp() * advantages
    gain = torch.stack([gain1, gain2], -1).min(dim=-1)[0]
    return -gain.mean()


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    loss = torch.nn.functional.mse_loss(values, returns, reduction="none")
    if old_values is not None and clip_eps is not None:
        clipped = old_values + (values - old_values).clamp(-clip_eps, clip_eps)
        loss = torch.maximum(loss, torch.nn.functional.mse_loss(clipped, returns, reduction="none"))
    return loss.mean()


def normalize_advantages(advantages):
    if advantages.numel() == 1:
        return advantages.clone()
    return (advantages - advantages.mean()) / advantages.std().clamp_min(1e-6)


def ppo_entropy_loss(entropy, coef):
    return -coef * entropy.mean()

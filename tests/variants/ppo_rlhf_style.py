"""Correct variant in verl's style, with its conventions declared: losses written as the max of
negated surrogates, an asymmetric clip (clip-higher, 0.28), dual clip c = 3 for negative advantages,
the value clip as bounds around V_old with a 0.5 factor, and whitening by rsqrt(var + 1e-8)."""

import torch

RLSPEC_ARRAY = "torch"
RLSPEC_CONVENTIONS = {"dual_clip": 3.0, "clip_eps_high": 0.28, "value_loss_factor": 0.5, "advantage_eps_form": "var"}


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    negative_approx_kl = torch.clamp(logp_new - logp_old, min=-20.0, max=20.0)  # verl's guard on exp
    ratio = torch.exp(negative_approx_kl)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - clip_eps, 1 + RLSPEC_CONVENTIONS["clip_eps_high"])
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses3 = -advantages * RLSPEC_CONVENTIONS["dual_clip"]
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    return torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1).mean()


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    vf_losses1 = (values - returns) ** 2
    if old_values is None or clip_eps is None:
        return 0.5 * vf_losses1.mean()
    vpredclipped = torch.max(torch.min(values, old_values + clip_eps), old_values - clip_eps)
    vf_losses2 = (vpredclipped - returns) ** 2
    return 0.5 * torch.max(vf_losses1, vf_losses2).mean()


def normalize_advantages(advantages):
    mean = advantages.mean()
    centred = advantages - mean
    var = (centred**2).sum() / max(advantages.numel() - 1, 1)  # unbiased where defined
    return centred * torch.rsqrt(var + 1e-8)


def ppo_entropy_loss(entropy, coef):
    return torch.mean(-coef * entropy)

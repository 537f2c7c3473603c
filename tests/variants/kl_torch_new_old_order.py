"""Correct variant with a declared argument order: an adapter for a PPO-style approx_kl(logp_new,
logp_old) with samples drawn from pi_old, so the first argument is the *other* distribution and the
second the sampler. torch tensors, expm1 form of k3, torch.where for the adaptive coefficient (with
Python-number branches torch.where yields the default dtype, float32: judged at float32)."""

import torch

RLSPEC_ARRAY = "torch"
RLSPEC_CONVENTIONS = {"kl_estimate_arguments": "other, sampler"}


def approx_kl(logp_new, logp_old, kind):
    log_ratio = logp_new - logp_old  # log(pi_new / pi_old), samples from pi_old
    estimators = {
        "k1": lambda: -log_ratio,
        "k2": lambda: 0.5 * log_ratio.square(),
        "k3": lambda: torch.expm1(log_ratio) - log_ratio,
    }
    return estimators[kind]()


def kl_estimate(logp_sampler, logp_other, kind):
    # Declared order "other, sampler": the suite passes log pi_new first and log pi_old second.
    return approx_kl(logp_sampler, logp_other, kind)


def kl_coefficient_update(beta, kl, target):
    ratio = torch.tensor(kl / target, dtype=torch.float64)
    up = torch.where(ratio > 1.5, 2.0, 1.0)
    down = torch.where(ratio < 1.0 / 1.5, 0.5, 1.0)
    return beta * up * down

"""Mutant: OpenRLHF's compute_approx_kl: float32, k3's log(pi / pi_ref) clamped at -10 and every
estimator clamped to [-10, 10] (k1 too): k1 is biased beyond pi_ref / pi = e^10 or below e^-10, k2 beyond
|log r| = 4.47, k3 beyond 13.61 and below e^-11, and their gradients vanish there."""

import torch

RLSPEC_MUTANT = {"clauses": ["KL-PENALTY-EXTREME-LOG-RATIO"], "bug": "R1 openrlhf-kl-estimates-clamped-to-ten"}
RLSPEC_PRECISION = "float32"


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    log_ratio = logp.float() - logp_ref.float()
    base = kind.rstrip("+")
    if base == "k1":
        value = log_ratio
    elif base == "k2":
        value = log_ratio**2 / 2.0
    else:
        lr = log_ratio.clamp(min=-10)  # log(pi / pi_ref) >= -10
        value = (-lr).exp() - 1 + lr
    value = value.clamp(min=-10, max=10)
    if kind.endswith("+"):
        surrogate = log_ratio**2 / 2.0
        if logp_old is not None:
            surrogate = torch.exp(logp.float() - logp_old.float()).detach() * surrogate
        value = value.detach() + surrogate - surrogate.detach()
    return value

"""Mutant: OpenRLHF's unbiased_gradient: the importance weight pi / pi_old of the straight-through KL
gradient is clipped at KL_IS_WEIGHT_CLIP = 10, which biases the expected gradient wherever pi / pi_old
exceeds 10 (pi = [0.05, 0.9, 0.05] on tokens from pi_old = [0.6, 0.05, 0.35]: weight 18)."""

import torch

RLSPEC_MUTANT = {"clauses": ["KL-PENALTY-OFF-POLICY"], "bug": "R9 openrlhf-kl-importance-weight-clipped (KL_IS_WEIGHT_CLIP = 10)"}


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    x = logp_ref - logp
    base = kind.rstrip("+")
    value = {"k1": lambda: -x, "k2": lambda: 0.5 * x**2, "k3": lambda: torch.expm1(x) - x}[base]()
    if not kind.endswith("+"):
        return value
    k2 = 0.5 * x**2
    if logp_old is not None:
        k2 = torch.exp(logp - logp_old).clamp(max=10.0).detach() * k2
    return value.detach() + (k2 - k2.detach())

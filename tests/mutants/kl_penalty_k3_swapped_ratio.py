"""Mutant: the per-token KL penalty with the log ratio taken the other way round inside every estimator,
x = logp - logp_ref (bug D1, ColossalAI #3696): k3 then averages E_pi[pi/pi_ref - 1 - log(pi/pi_ref)]
= 0.3418 at the KL known answer instead of KL(pi || pi_ref) = 0.2332."""

import torch

RLSPEC_MUTANT = {"clauses": ["KL-PENALTY-VALUES"], "bug": "D1 k3-with-swapped-ratio"}


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    x = logp - logp_ref  # should be logp_ref - logp
    base = kind.rstrip("+")
    value = {"k1": lambda: -x, "k2": lambda: 0.5 * x**2, "k3": lambda: torch.expm1(x) - x}[base]()
    if not kind.endswith("+"):
        return value
    k2 = 0.5 * x**2
    if logp_old is not None:
        k2 = torch.exp(logp - logp_old).detach() * k2
    return value.detach() + (k2 - k2.detach())

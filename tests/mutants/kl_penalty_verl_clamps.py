"""Mutant: verl's kl_penalty: k3 ('low_var_kl') clamps the log ratio to [-20, 20] and the estimate to
[-10, 10] (bugs D3, D4): once k3 > 10, i.e. pi_ref / pi > 13.61 or < e^-11, the value is biased low
and the gradient is zero."""

import torch

RLSPEC_MUTANT = {"clauses": ["KL-PENALTY-EXTREME-LOG-RATIO"], "bug": "D4 k3-output-clamp-kills-kl-gradient-on-most-divergent-tokens"}


def _forward(logp, logp_ref, kind):
    if kind == "k1":
        return logp - logp_ref
    if kind == "k2":
        return 0.5 * (logp - logp_ref).square()
    kl = torch.clamp(logp_ref - logp, min=-20, max=20)
    return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    if kind.endswith("+"):
        backward = _forward(logp, logp_ref, "k2")
        return backward + (_forward(logp, logp_ref, kind[:-1]) - backward).detach()
    return _forward(logp, logp_ref, kind)

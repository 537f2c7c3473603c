"""Correct variant in verl's style without its clamps: the estimators written as verl writes them
(k1 = logp - ref, k3 = exp(kl) - kl - 1 with kl = ref - logp, not expm1), the straight-through kinds as
backward + (forward - backward).detach() (so the value carries two roundings), and the importance weight
pi / pi_old applied to the backward term off-policy."""

import torch

RLSPEC_ARRAY = "torch"


def _forward(logp, ref, kind):
    if kind == "k1":
        return logp - ref
    if kind == "k2":
        return 0.5 * (logp - ref).square()
    kl = ref - logp
    return torch.exp(kl) - kl - 1


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    if not kind.endswith("+"):
        return _forward(logp, logp_ref, kind)
    backward = _forward(logp, logp_ref, "k2")
    if logp_old is not None:
        backward = torch.exp(logp - logp_old).detach() * backward
    return backward + (_forward(logp, logp_ref, kind[:-1]) - backward).detach()

"""Mutant: verl's KL loss off-policy: logp_old is ignored, so the straight-through kinds take k2's
gradient on pi_old's tokens, [-0.222398, -0.107985, 0.330383] for pi_old = [0.3, 0.3, 0.4] instead of
the reverse KL's [-0.185272, -0.156268, 0.341540], while the candidate declares nothing (the default
kl_penalty_off_policy = 'importance-weighted'; bug D6)."""

import torch

RLSPEC_MUTANT = {"clauses": ["KL-PENALTY-OFF-POLICY"], "bug": "D6 KL loss on off-policy samples without the importance weight"}


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    x = logp_ref - logp
    base = kind.rstrip("+")
    value = {"k1": lambda: -x, "k2": lambda: 0.5 * x**2, "k3": lambda: torch.expm1(x) - x}[base]()
    if not kind.endswith("+"):
        return value
    k2 = 0.5 * x**2
    return k2 + (value - k2).detach()  # verl's straight-through form

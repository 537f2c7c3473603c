"""Mutant: the '+' kinds return the named estimator with its own gradient (no straight-through), so
'k3+' used as a loss follows the forward KL's gradient [-0.2, -0.1, 0.3] at the KL known answer while it is
documented as the reverse KL's [-0.185, -0.156, 0.342], and 'k1+' has none (bug D2: k3 as a loss
claimed to regularise toward the reverse KL)."""

import torch

RLSPEC_MUTANT = {"clauses": ["KL-PENALTY-EXPECTED-GRADIENT"], "bug": "D2 k3-in-loss-gives-forward-kl-gradient ('+' not straight-through)"}


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    x = logp_ref - logp
    base = kind.rstrip("+")
    return {"k1": lambda: -x, "k2": lambda: 0.5 * x**2, "k3": lambda: torch.expm1(x) - x}[base]()

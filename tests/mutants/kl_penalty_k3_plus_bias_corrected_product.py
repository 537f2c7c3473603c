"""Mutant: 'k3+' written as TRL's bias-corrected k3 (use_bias_correction_kl): k3 times the non-detached
ratio exp(logp - logp_old) (logp_old = logp detached on-policy). Value and gradient are right in exact
arithmetic, but the gradient is formed as (1 - e^x) r + k3 r, which cancels catastrophically where e^x
is large: at log(pi_ref / pi) = 30 it is off by about 1e-3 instead of 1e-13 (TRL's probe at x = 99.9:
0.0 instead of -99.9)."""

import torch

RLSPEC_MUTANT = {"clauses": ["KL-PENALTY-EXTREME-LOG-RATIO"], "bug": "R10 trl-bias-corrected-kl-gradient-cancels"}


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    x = logp_ref - logp
    base = kind.rstrip("+")
    value = {"k1": lambda: -x, "k2": lambda: 0.5 * x**2, "k3": lambda: torch.expm1(x) - x}[base]()
    if kind == "k3+":  # trl/trainer/grpo_trainer.py: per_token_kl * coef_1
        old = logp.detach() if logp_old is None else logp_old
        per_token_kl = torch.exp(logp_ref - logp) - (logp_ref - logp) - 1
        return per_token_kl * torch.exp(logp - old)
    if not kind.endswith("+"):
        return value
    k2 = 0.5 * x**2
    if logp_old is not None:
        k2 = torch.exp(logp - logp_old).detach() * k2
    return value.detach() + (k2 - k2.detach())

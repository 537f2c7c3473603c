"""Group-relative advantages (GRPO, RLOO, Dr. GRPO) and the per-token KL penalty used as a loss.

Group advantages (Shao et al. 2024, DeepSeekMath; Ahmadian et al. 2024, RLOO; Liu et al. 2025,
Dr. GRPO). Samples with the same id in ``groups`` answer the same prompt. Over a group's scorable
members (NaN scores are left out), with n members, mean m and std s (ddof 1):

    grpo   A_i = (r_i - m) / (s + eps)                         eps = 1e-6
    rloo   A_i = r_i - (sum_{j in group} r_j - r_i) / (n - 1)   the baseline leaves i out
    mean   A_i = r_i - m                                        = (1 - 1/n) times the rloo advantage

A group with a single scorable member gets 0, an unscorable sample gets 0. Groups may come in any
order and any size.

KL penalty (Schulman 2020, "Approximating KL divergence"; verl's "+" kinds). For the sampled token,
x = log pi_ref(y) - log pi(y), and each kind estimates KL(pi || pi_ref) on tokens drawn from pi:

    k1 = -x        k2 = x^2 / 2        k3 = e^x - 1 - x   (>= 0; computed as expm1(x) - x)

Used as a loss (the tokens fixed, only log pi differentiated) k1 has expected gradient 0, k2 the
reverse KL's grad KL(pi || pi_ref), k3 the forward KL's grad KL(pi_ref || pi). The straight-through
kinds k1+, k2+, k3+ keep the value of k1, k2, k3 and take the gradient of w k2, with
w = pi / pi_old (detached; 1 when the tokens come from pi itself), whose expectation under the
sampling policy is grad KL(pi || pi_ref) on- and off-policy.
"""

from __future__ import annotations

import numpy as np
import torch

GROUP_STD_EPS = 1e-6


def group_advantages(scores, groups, kind):
    """Per-sample advantages; numpy scores (N,) (NaN: unscorable), integer groups (N,) -> (N,)."""
    scores = np.asarray(scores, dtype=np.float64)
    groups = np.asarray(groups)
    advantages = np.zeros_like(scores)  # unscorable samples and singleton groups keep 0
    for group in np.unique(groups):
        members = np.flatnonzero((groups == group) & ~np.isnan(scores))  # the group's scorable samples
        n = len(members)
        if n < 2:
            continue
        r = scores[members]
        centred = r - r.mean()  # two passes: the spread of near-identical scores survives
        if kind == "grpo":
            std = np.sqrt(np.sum(centred**2) / (n - 1))
            advantages[members] = centred / (std + GROUP_STD_EPS)
        elif kind == "rloo":
            advantages[members] = centred * (n / (n - 1))  # r_i - (sum - r_i) / (n - 1)
        elif kind == "mean":
            advantages[members] = centred
        else:
            raise ValueError(f"kind must be 'grpo', 'rloo' or 'mean', not {kind!r}")
    return advantages


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    """Per-token KL(pi || pi_ref) estimate; torch (B, L) log-probs of the sampled tokens -> (B, L)."""
    x = logp_ref - logp  # (B, L) log(pi_ref / pi)
    estimators = {"k1": lambda: -x, "k2": lambda: 0.5 * x**2, "k3": lambda: torch.expm1(x) - x}
    base = kind[:-1] if kind.endswith("+") else kind
    if base not in estimators:
        raise ValueError(f"kind must be one of k1, k2, k3, k1+, k2+, k3+, not {kind!r}")
    value = estimators[base]()
    if not kind.endswith("+"):
        return value
    surrogate = 0.5 * x**2  # the gradient's source: d/dlogp = logp - logp_ref
    if logp_old is not None:
        surrogate = torch.exp(logp - logp_old).detach() * surrogate  # importance weight pi / pi_old
    # value exactly as computed (s - s is exactly 0), gradient of the surrogate
    return value.detach() + (surrogate - surrogate.detach())

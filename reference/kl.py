"""Sample estimators of KL(p || q) and the adaptive KL-penalty coefficient.

Estimators (Schulman, "Approximating KL divergence", 2020): with
samples x ~ p (the *sampler*) and the log ratio ``log r = log q(x) - log p(x)`` against the *other*
distribution q,

    k1 = -log r                       unbiased: E_p[k1] = KL(p || q); negative on about half the samples
    k2 = (log r)^2 / 2                biased; E_p[k2] = KL(p || q) + O(|log r|^3)
    k3 = (r - 1) - log r              unbiased (E_p[r] = 1) and >= 0 per sample, = 0 only at r = 1

The first argument is the distribution that drew the samples, as in KL(p || q). A PPO learner's
``approx_kl`` with samples from pi_old estimates KL(pi_old || pi_new): sampler = pi_old.

Adaptive penalty (Schulman et al. 2017, arXiv:1707.06347 §4): after an
update with measured KL d and target d_targ,

    beta <- 2 beta   if d > 1.5 d_targ
    beta <- beta / 2 if d < d_targ / 1.5
    beta             otherwise (both inequalities strict)
"""

from __future__ import annotations

import numpy as np


def kl_estimate(logp_sampler, logp_other, kind):
    """Per-sample estimates of KL(sampler || other); numpy (B,) log-probs of the sampled x -> (B,)."""
    log_ratio = logp_other - logp_sampler  # (B,) log r = log q(x) - log p(x)
    if kind == "k1":
        return -log_ratio
    if kind == "k2":
        return 0.5 * log_ratio**2
    if kind == "k3":
        # expm1 keeps r - 1 accurate near r = 1, where exp(x) - 1 would lose every digit
        return np.expm1(log_ratio) - log_ratio
    raise ValueError(f"kind must be 'k1', 'k2' or 'k3', not {kind!r}")


def kl_coefficient_update(beta, kl, target):
    """The adaptive KL-penalty coefficient after an update that measured ``kl`` (target ``target``)."""
    if kl > 1.5 * target:
        return 2.0 * beta
    if kl < target / 1.5:
        return beta / 2.0
    return beta

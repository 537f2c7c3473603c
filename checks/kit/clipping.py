"""The clipped surrogate's formulas and rounding-error bounds, shared by the PPO chapter (``ppo_clip_loss``,
a mean over samples) and the RLHF chapter (``token_ppo_loss``, a sum over real tokens).

The objective per sample is min(r A, clip(r, 1 - eps, 1 + eps_high) A), floored at c A for A < 0 under
a dual clip c (Schulman et al. 2017, arXiv:1707.06347, eq. 7; dual clip: Ye et al. 2020, arXiv:1912.09729,
eq. 5). Everything here is evaluated in float64 on the exact inputs the candidate received.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .tolerances import TINY, smallest_normal


@dataclass(frozen=True)
class ClipRange:
    """The shape of the clipped objective: the range [1 - eps, 1 + eps_high] and the dual-clip floor c A."""

    dual_clip: float | None = None
    clip_eps_high: float | None = None

    def bounds(self, clip_eps: float) -> tuple[float, float]:
        """The clip range [1 - eps, 1 + eps_high]."""
        high = self.clip_eps_high if self.clip_eps_high is not None else clip_eps
        return 1.0 - clip_eps, 1.0 + high


def clip_objective(r, A, clip_eps, conv: ClipRange):
    """Per-sample objective min(r A, clip(r, lo, hi) A), floored at c A for A < 0 under a dual clip."""
    lo, hi = conv.bounds(clip_eps)
    objective = np.minimum(r * A, np.clip(r, lo, hi) * A)
    if conv.dual_clip is not None:
        objective = np.where(A < 0, np.maximum(objective, conv.dual_clip * A), objective)
    return objective


def live(r, A, clip_eps, conv: ClipRange):
    """Where d objective / d log r = r A (else 0), for ratios strictly away from every kink."""
    lo, hi = conv.bounds(clip_eps)
    negative_live = r > lo
    if conv.dual_clip is not None:
        negative_live &= r < conv.dual_clip
    return np.where(A > 0, r < hi, np.where(A < 0, negative_live, False))


def log_derivative_bounds(r, A, clip_eps, conv: ClipRange, rel):
    """[lo, hi] for d objective / d log r at each sample.

    Away from the kinks it is r A (live) or 0 (clipped). At a clip boundary or the dual-clip
    constant (to within the candidate's relative ratio error ``rel``) the terms of the min/max tie,
    and autograd may return any convex combination of their derivatives (torch splits a tie):
    the bounds are then 0 and r A, even where the function itself is smooth (A > 0 at 1 - eps).
    """
    lo, hi = conv.bounds(clip_eps)
    kinks = [lo, hi] + ([conv.dual_clip] if conv.dual_clip is not None else [])
    at_kink = np.any([np.abs(r - k) <= rel * r for k in kinks], axis=0)
    values = [np.where(live(r * f, A, clip_eps, conv), r * A, 0.0) for f in (1.0 - rel, 1.0, 1.0 + rel)]
    values += [np.where(at_kink, 0.0, values[1]), np.where(at_kink & (A != 0), r * A, values[1])]
    return np.minimum.reduce(values), np.maximum.reduce(values)


# tolerances
#
# Inputs are exact in the run's dtype. With u the unit roundoff of the precision judged:
#   x = logp_new - logp_old: a candidate working in its own (declared) precision may round each
#       input, |dx| <= u (|logp_new| + |logp_old|), and the subtraction adds u |x|;
#   r = exp(x): relative error <= |dx| + 2u (exp within one ulp);
#   clip bounds 1 -+ eps round once; the product with A and the min add one rounding each;
#   mean over B: (B - 1) u sum |terms| (any summation order) and one division.
# With m_i = |logp_new,i| + |logp_old,i| + 1 and R_i = max(r_i, 1 + eps_high, c) |A_i| (a bound on
# both branches of the min), first order in u and doubled for the float64 oracle's own rounding:
#   |d loss| <= 2 u / B sum_i (m_i + B + 6) R_i,
#   |d grad_i| <= 2 u (m_i + 8) r_i |A_i| / B          (exp', the chain through r and the 1/B).
# Underflow: below the smallest normal number eta (1.2e-38 in float32) rounding is absolute, so
# each of the at most 16 operations on a path may also lose eta (flush-to-zero included): + 16 eta.


def ratio_relative_error(logp_new, logp_old, u):
    """The relative error of a candidate's r = exp(logp_new - logp_old), as bounded above (doubled)."""
    return 4 * u * (np.abs(logp_new) + np.abs(logp_old) + 3)


def clip_loss_tolerance(logp_new, logp_old, A, clip_eps, conv, u):
    """The bound above on a candidate's -mean of the clipped objective."""
    r = np.exp(logp_new - logp_old)
    B = len(A)
    bound = np.maximum.reduce([r, np.full_like(r, conv.bounds(clip_eps)[1]), np.full_like(r, conv.dual_clip or 0.0)]) * np.abs(A)
    m = np.abs(logp_new) + np.abs(logp_old) + 1
    return 2 * u / B * float(np.sum((m + B + 6) * bound)) + 16 * smallest_normal(u) + TINY


def clip_gradient_tolerance(logp_new, logp_old, A, u):
    """The bound above on a candidate's d loss / d logp_new per sample."""
    r = np.exp(logp_new - logp_old)
    m = np.abs(logp_new) + np.abs(logp_old) + 1
    return 2 * u * (m + 8) * r * np.abs(A) / len(A) + 16 * smallest_normal(u) + TINY

"""The KL estimators' exact values and rounding-error bounds, shared by the KL chapter (``kl_estimate``),
the GRPO chapter (``kl_penalty``, whose values are the same estimators per token) and the theory chapter
(the estimators' variances); and the call of ``kl_estimate`` under the declared argument order.

With x = log r = log q - log p the log ratio of the other distribution q to the sampler p (Schulman,
"Approximating KL Divergence", 2020): k1 = -x, k2 = x^2 / 2, k3 = e^x - 1 - x. Everything here is
evaluated in float64 on the exact inputs the candidate received.
"""

from __future__ import annotations

import math

import numpy as np

from .strategies import rounded
from .tolerances import TINY, U64, smallest_normal

# Tolerances.
#
# u: the candidate's unit roundoff (Call.unit_roundoff); a, b: logp_sampler and logp_other as the
# candidate received them; x = b - a. A correct candidate may round a and b to its own precision
# and then subtract, so its log ratio is off by at most
#     dx = 2 u (|a| + |b|).
# ELEMENTARY bounds the relative error of exp, expm1 and log in units of u: 8 u (4 ulp) covers
# glibc and Sleef (<= 1 ulp) and NumPy's float32 SIMD exp/log (documented <= 2.52 and 3.83 ulp).
#     k1 = -x:            dx
#     k2 = x^2 / 2:       |x| dx + u x^2                              (the square rounds; / 2 is exact)
#     k3 = e^x - 1 - x:   |e^x - 1| dx + (2 ELEMENTARY + 4) u (e^x + 1 + |x|)
# the k3 constant covers exp then two subtractions, expm1 then one, and a ratio formed as
# exp(log q) / exp(log p) (two exps and a division). The oracle evaluates the same formulas in
# float64 from the same a and b, so its error is at most the same bound with u = 2^-53: every
# per-sample tolerance is twice the bound. Below the smallest normal number eta (1.2e-38 in float32)
# rounding is absolute: each of the at most 4 roundings may lose eta (flush to zero included).
#
# Expectations: E = sum_i p_i e_i with p_i = exp(a_i) in float64. Each term carries its per-sample
# tolerance; the float64 sums add n u64 sum_i p_i (|e_i| + |x_i|). k3 is unbiased only because
# sum_i q_i = sum_i p_i = 1; the inputs are rounded log-probabilities, whose exponentials sum to 1
# only up to |sum_i exp(b_i) - sum_i exp(a_i)|, which enters E[k3] - KL exactly once.

ELEMENTARY = 8


def per_sample_tolerance(kind: str, a, b, u) -> np.ndarray:
    """The bound above on a candidate's per-sample estimate of ``kind`` (doubled for the oracle)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    x = b - a
    dx = 2 * u * (np.abs(a) + np.abs(b))
    if kind == "k1":
        bound = dx
    elif kind == "k2":
        bound = np.abs(x) * dx + u * x**2
    else:
        ex = np.exp(x)
        bound = np.abs(np.expm1(x)) * dx + (2 * ELEMENTARY + 4) * u * (ex + 1 + np.abs(x))
    return 2 * bound + 4 * smallest_normal(u) + TINY


def exact(kind: str, a, b) -> np.ndarray:
    """The estimator evaluated in float64 on the inputs the candidate received."""
    x = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if kind == "k1":
        return -x
    if kind == "k2":
        return 0.5 * x**2
    return np.expm1(x) - x


def expectation_tolerance(kind: str, a, b, estimates, u) -> float:
    """The bound above on sum_i p_i estimates_i, p = exp(a), for the candidate's ``estimates``."""
    p = np.exp(a)
    x = b - a
    tol = float(np.sum(p * per_sample_tolerance(kind, a, b, u)))
    tol += len(a) * U64 * float(np.sum(p * (np.abs(estimates) + np.abs(x))))
    if kind == "k3":
        tol += abs(math.fsum(np.exp(b)) - math.fsum(np.exp(a))) + 4 * len(a) * U64
    return tol + TINY


def kl_divergence(a, b) -> float:
    """``KL(p || q) = sum p (log p - log q)`` for log-probabilities a (of p) and b (of q)."""
    return math.fsum(np.exp(a) * (a - b))


def log_softmax(z) -> np.ndarray:
    """log softmax(z) in float64, shifted by the maximum (stable for any logits)."""
    z = np.asarray(z, dtype=np.float64)
    return z - (z.max() + np.log(np.sum(np.exp(z - z.max()))))


# ---------------------------------------------------------------------------------------------
# calling the candidate under its declared argument order

def argument_order(ctx) -> str:
    """kl_estimate_arguments: which argument receives the sampler's log-probabilities."""
    return ctx.convention("kl_estimate_arguments")


def run_kl(ctx, logp_sampler, logp_other, kind: str, *, allow_nonfinite: bool = False):
    """Per-sample estimates of KL(sampler || other): ``(estimates, call, a, b)``, a and b as passed."""
    a, b = rounded(logp_sampler, ctx.dtype), rounded(logp_other, ctx.dtype)
    if argument_order(ctx) == "sampler, other":
        args = {"logp_sampler": a, "logp_other": b, "kind": kind}
    else:  # declared: the first argument is the other distribution, the second the sampler
        args = {"logp_sampler": b, "logp_other": a, "kind": kind}
    call = ctx.call("kl_estimate", args, shape=a.shape, allow_nonfinite=allow_nonfinite)
    return call.outputs[0], call, a, b


def order_note(ctx) -> str:
    order = argument_order(ctx)
    return "" if order == "sampler, other" else f" (declared argument order: {order})"

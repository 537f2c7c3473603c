"""Batch advantage normalisation as the contract declares it, and its rounding-error bound: shared by the PPO
chapter (``normalize_advantages``, ``ppo_update``) and the theory chapter (the expected gradient of a
normalised batch)."""

from __future__ import annotations

import math

import numpy as np

from .tolerances import TINY, smallest_normal


def normalised(A, ddof: int, eps: float, eps_form: str):
    """The declared normalisation of ``A`` (float64): ``(A - mean) / scale`` and the scale, with the std of
    ``ddof`` and ``eps`` applied as ``eps_form`` (spec/contract/30_ppo.toml)."""
    n = len(A)
    centred = A - A.mean()
    variance = float(np.sum(centred**2)) / max(n - ddof, 1)
    if eps_form == "var":
        scale = math.sqrt(variance + eps)
    elif eps_form == "clamp":
        scale = max(math.sqrt(variance), eps)
    else:
        scale = math.sqrt(variance) + eps
    return centred / scale, scale


def normalisation_tolerance(A, ddof: int, eps: float, eps_form: str, u):
    """Per-element bound on |computed - exact| for (A - mean) / scale.

    With M = max |A|, n elements and s the exact scale:
      mean: |d mean| <= n u M (any summation order), so each centred value c_i = A_i - mean is off
            by e_c <= (n + 2) u M (the mean's error, the subtraction's rounding);
      variance sum c^2: relative error <= 2 e_c / |c|... bounded absolutely by
            sum (2 |c_i| e_c + e_c^2) + n u sum c_i^2, so the std (a square root halves relative
            errors) is off by <= d_s = (sum (2 |c_i| e_c + e_c^2) / (2 s'^2) + (n + 2) u) s'
            with s' = the exact std (0 if all equal);
      the result c_i / s: <= e_c / s + |c_i / s| (d_s / s + 2 u).
    Doubled for the float64 oracle and first order in u.
    """
    n = len(A)
    M = float(np.max(np.abs(A))) if n else 0.0
    out, scale = normalised(A, ddof, eps, eps_form)
    centred = A - A.mean()
    e_c = (n + 2) * u * M + 4 * smallest_normal(u)  # underflow loses up to eta per operation
    std = math.sqrt(float(np.sum(centred**2)) / max(n - ddof, 1))
    if std > 0:
        d_std = (float(np.sum(2 * np.abs(centred) * e_c + e_c**2)) / (2 * std**2 * max(n - ddof, 1)) + (n + 2) * u) * std
    else:
        d_std = math.sqrt(n * e_c**2)
    d_scale = d_std if eps_form != "var" else d_std * std / scale if scale > 0 else d_std
    return 2 * (e_c / scale + np.abs(out) * (d_scale / scale + 2 * u)) + TINY

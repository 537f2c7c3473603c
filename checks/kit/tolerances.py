"""Tolerances, each derived from a rounding-error bound (no tuned constants).

Notation: ``u`` is the unit roundoff of the precision being judged (2^-53 for float64, 2^-24 for
float32); ``c = gamma * lambda``; on the segment that starts at ``t`` and runs ``n_t`` steps to the
next episode end (or the rollout's end), ``m_j = |r_j| + gamma |next_values_j| (not terminal) + |values_j|``
bounds the magnitude of the terms that make up ``delta_j``, and

    S1_t = sum_{l<n_t} c^l m_{t+l}            (the advantage computed on absolute values)
    S2_t = sum_{l<n_t} (l+1) c^l m_{t+l}      (= S1 run through the same recursion once more)

GAE bound (first order in u, any evaluation order). ``A_t = sum_l c^l delta_{t+l}``: each term needs
at most l+3 roundings (three for delta, l-1 for c^l by repeated products, one for the product with
delta), and summing n_t terms in any order adds at most n_t-1 roundings to each term. Hence

    |A_hat_t - A_t| <= u sum_l (n_t + l + 2) c^l m_{t+l} = u ((n_t + 1) S1_t + S2_t).

The backward recursion does better (4 u S2_t) and is covered. An implementation that rounds float64
inputs to float32 itself adds at most u S1_t. The oracle the suite compares against is evaluated in
float64 by the same kind of formula, so when the candidate also works in float64 its error counts
once more: the tolerance is twice the bound, plus u S1_t for input rounding:

    tol_t = u (2 (n_t + 1) S1_t + 2 S2_t + S1_t)

Returns: a candidate may round V_t to its own precision (u |V_t|) and then rounds the sum
(u |A_t + V_t| <= u (|A_t| + |V_t|)): ``tol_t + u (|A_t| + 2 |V_t|)``.

Underflow. Below the smallest normal number ``eta`` (1.2e-38 in float32) rounding is absolute, not
relative: each rounding may also lose up to ``eta`` (flush-to-zero included). Counting three inputs
per TD error, that is ``m_j + 3 eta / u`` in place of ``m_j`` in the bound above.
"""

from __future__ import annotations

import numpy as np

TINY = 1e-300  # keeps an exact-zero case from demanding bit equality with a relative bound of 0
U64 = 2.0**-53  # the unit roundoff of float64, the precision of the suite's own oracles


def discounted_sum(terms, episode_end, c):
    """``S_t = terms_t + c (1 - end_t) S_{t+1}`` backwards over axis 0 (non-negative inputs)."""
    if terms.ndim == 1:  # plain floats: 10x faster than 0-d numpy arithmetic on long rollouts
        out, running = [0.0] * len(terms), 0.0
        for t, (term, end) in enumerate(zip(terms[::-1].tolist(), episode_end[::-1].tolist())):
            running = term + (0.0 if end else c * running)
            out[t] = running
        return np.array(out[::-1])
    out = np.zeros_like(terms, dtype=np.float64)
    running = np.zeros(terms.shape[1:])
    for t in reversed(range(len(terms))):
        running = terms[t] + c * np.where(episode_end[t], 0.0, running)
        out[t] = running
    return out


def segment_steps(episode_end):
    """``n_t``: steps from t to the end of its segment, counting t."""
    return discounted_sum(np.ones(episode_end.shape), episode_end, 1.0)


def smallest_normal(u: float) -> float:
    """``eta`` for the precision whose unit roundoff is ``u``."""
    for dtype in (np.float64, np.float32, np.float16):
        if u <= np.finfo(dtype).eps / 2:
            return float(np.finfo(dtype).smallest_normal)
    return float(np.finfo(np.float16).smallest_normal)


def tiny(u: float) -> float:
    """The absolute floor of a bound whose relative part vanishes where the exact value is 0. In float64, TINY. In a
    coarser precision, ``eta``: a result that is 0 in exact arithmetic may come back as a subnormal residue (one
    rounding below ``eta`` is absolute, flush-to-zero included), and a float64-sized floor would demand bit equality
    of a float32 result (an answer one ulp off, 1.4e-45, failed; tests/test_bounds.py)."""
    return max(TINY, smallest_normal(u))


def rounding_error(x, u):
    """``|x - fl(x)|``, elementwise: how far one rounding to the precision whose unit roundoff is ``u`` moves the float64
    value ``x`` (0 when ``u`` is float64's). The bound of a promise that is exact (a copy, a selection) at the precision
    a candidate is judged by: the exact float64 value passes, and so does its rounding to a declared lower precision
    (a copy made in float32), and nothing further off does."""
    x = np.asarray(x, dtype=np.float64)
    for dtype in (np.float64, np.float32, np.float16):
        if u <= np.finfo(dtype).eps / 2:
            return np.abs(x - x.astype(dtype).astype(np.float64))
    return u * np.abs(x) + smallest_normal(u)  # a precision numpy has no dtype for (bfloat16): one rounding's bound


def sum_identity_tolerance(advantages, values, u):
    """``returns = advantages + values`` checked on the candidate's own two outputs. Each output may be one ulp (at most
    ``2 u |x|``, or ``eta`` below the smallest normal) from a pair that satisfies the identity exactly, whichever way the
    candidate computed them (returns from advantages, or advantages from returns, or both from a more exact recursion),
    a candidate in a lower precision than its inputs rounds ``V`` first (``u |V|``), and the check forms ``A + V`` in
    float64 (``U64 |A + V|``):

        |R_hat - (A_hat + V)| <= 2 u |A + V| + 2 u |A| + u |V| + U64 |A + V| + 2 eta

    (the previous ``u (|A| + 2 |V|)`` admitted only the rounding of ``fl(A + V)`` and rejected an answer one ulp off)."""
    a, v = np.asarray(advantages, dtype=np.float64), np.asarray(values, dtype=np.float64)
    return (2 * u + U64) * np.abs(a + v) + 2 * u * np.abs(a) + u * np.abs(v) + 2 * smallest_normal(u) + TINY


def gae_tolerance(rewards, values, next_values, terminated, truncated, gamma, lam, u):
    """Per-element tolerance on advantages for the inputs given (see the module docstring)."""
    rewards, values, next_values = (np.abs(np.asarray(x, dtype=np.float64)) for x in (rewards, values, next_values))
    episode_end = np.logical_or(terminated, truncated)
    m = rewards + abs(gamma) * np.where(terminated, 0.0, next_values) + values + 3 * smallest_normal(u) / u
    c = abs(gamma * lam)
    s1 = discounted_sum(m, episode_end, c)
    s2 = discounted_sum(s1, episode_end, c)
    n = segment_steps(episode_end)
    return u * (2 * (n + 1) * s1 + 2 * s2 + s1) + TINY


def returns_tolerance(advantage_tol, advantages, values, u):
    return advantage_tol + u * (np.abs(advantages) + 2 * np.abs(values)) + smallest_normal(u)


def rewards_to_go_tolerance(rewards, gamma, u):
    """Reward-to-go is GAE with values 0, lambda 1 and one segment: the same bound applies."""
    rewards = np.asarray(rewards, dtype=np.float64)
    zeros = np.zeros_like(rewards)
    flags = np.zeros(rewards.shape, dtype=bool)
    return gae_tolerance(rewards, zeros, zeros, flags, flags, gamma, 1.0, u)


def td_terms(rewards, values, next_values, terminated, gamma):
    """``m_t``: the magnitudes that make up delta_t (no bootstrap term on terminated steps)."""
    return np.abs(rewards) + abs(gamma) * np.where(terminated, 0.0, np.abs(next_values)) + np.abs(values)

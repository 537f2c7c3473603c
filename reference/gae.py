"""Generalised Advantage Estimation (Schulman et al., ICLR 2016, arXiv:1506.02438).

    delta_t = r_t + gamma (1 - term_t) V(s_{t+1}) - V(s_t)                    TD error
    A_t     = delta_t + gamma lambda (1 - end_t) A_{t+1},   end_t = term_t or trunc_t
            = sum_{l=0}^{K_t - 1} (gamma lambda)^l delta_{t+l}                 (K_t: steps left in the segment)
    R_t     = A_t + V(s_t)                                                     value target

Two masks, because a time-limit truncation is not a terminal state (Pardo et al. 2018,
arXiv:1712.00378): a truncated step still bootstraps from V of its real final observation, but the
trace must not run on into the next episode. ``terminated`` wins when both flags are set.

Arrays are time-major, (T,) or (T, N); ``next_values[t]`` is V of the observation that followed
step ``t`` (the final observation of an episode, before any reset). The rollout's last step
bootstraps from ``next_values[T-1]`` unless it terminated.
"""

from __future__ import annotations

import numpy as np


def td_errors(rewards, values, next_values, terminated, gamma):
    """``delta_t = r_t + gamma (1 - term_t) V(s_{t+1}) - V(s_t)``; all (T,) or (T, N)."""
    bootstrap = np.where(terminated, 0.0, next_values)  # V(s_{t+1}), zero past a terminal state
    return rewards + gamma * bootstrap - values


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """GAE(gamma, lambda) by the backward recursion; returns ``(advantages, returns)``."""
    delta = td_errors(rewards, values, next_values, terminated, gamma)  # (T, ...)
    # gamma lambda (1 - end_t), end_t = term_t or trunc_t: the trace stops at every episode end
    decay = np.where(np.logical_or(terminated, truncated), 0.0, gamma * lam).astype(delta.dtype)  # (T, ...)
    advantages = np.empty_like(delta)
    running = np.zeros_like(delta[0])  # A_{t+1}; zero past the end of the rollout
    for t in reversed(range(len(delta))):
        running = advantages[t] = delta[t] + decay[t] * running
    return advantages, advantages + values


def segment_lengths(terminated, truncated):
    """``K_t``: how many steps from ``t`` to the end of its segment (episode end or rollout end).

    (T,) or (T, N) bool -> same shape, int. ``K_t = 1`` on a step that ends an episode.
    """
    episode_end = np.logical_or(terminated, truncated)
    lengths = np.zeros(episode_end.shape, dtype=np.int64)
    following = np.zeros(episode_end.shape[1:], dtype=np.int64)  # K_{t+1}
    for t in reversed(range(len(episode_end))):
        following = 1 + np.where(episode_end[t], 0, following)
        lengths[t] = following
    return lengths


def n_step_advantage(rewards, values, next_values, terminated, truncated, gamma, n):
    """``A^(n)_t = sum_{l<n} gamma^l r_{t+l} + gamma^n V(s_{t+n}) - V(s_t)``, cut at the segment end.

    Written from the n-step return, not from TD errors: if the segment ends after ``K_t < n`` steps,
    the return stops there and bootstraps from ``next_values`` (zero if the end is terminal), so
    ``A^(n) = A^(K_t)`` for every ``n >= K_t``. Shapes (T,) or (T, N).
    """
    T = len(rewards)
    lengths = segment_lengths(terminated, truncated)
    out = np.zeros_like(np.asarray(rewards, dtype=np.float64))
    for index in np.ndindex(*rewards.shape[1:]):
        column = (slice(None),) + index
        r, v, nv = rewards[column], values[column], next_values[column]
        term, K = terminated[column], lengths[column]
        for t in range(T):
            steps = min(n, K[t])
            last = t + steps - 1
            ret = sum(gamma**l * r[t + l] for l in range(steps))
            ret += gamma**steps * (0.0 if term[last] else nv[last])
            out[(t,) + index] = ret - v[t]
    return out


def lambda_mixture_weights(K, lam):
    """Weights on ``A^(1..K)`` that make the lambda-mixture exact on a segment of ``K`` steps.

    ``(1-lambda) lambda^{n-1}`` for ``n < K`` and the remaining mass ``lambda^{K-1}`` on ``A^(K)``:
    the infinite mixture with every ``A^(n), n >= K``, equal to ``A^(K)``. They sum to 1. Dropping
    the last weight's tail gives the finite-horizon correction ``lambda^K sum_l gamma^l delta``.
    """
    weights = [(1.0 - lam) * lam ** (n - 1) for n in range(1, K)]
    return np.array(weights + [lam ** (K - 1)])


def lambda_mixture_advantage(rewards, values, next_values, terminated, truncated, gamma, lam):
    """GAE as the explicit mixture ``sum_n w_n A^(n)_t`` with ``lambda_mixture_weights(K_t, lam)``.

    Slow (O(T^2) n-step advantages) and independent of the recursion in :func:`gae`.
    """
    lengths = segment_lengths(terminated, truncated)
    out = np.zeros_like(np.asarray(rewards, dtype=np.float64))
    args = (rewards, values, next_values, terminated, truncated, gamma)
    for n in range(1, int(lengths.max(initial=0)) + 1):
        a_n = n_step_advantage(*args, n)
        for index in np.ndindex(*lengths.shape):
            K = lengths[index]
            if n <= K:
                out[index] += lambda_mixture_weights(K, lam)[n - 1] * a_n[index]
    return out

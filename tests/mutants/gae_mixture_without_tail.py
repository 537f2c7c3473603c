"""Mutant: GAE computed as the truncated lambda-mixture (1 - lambda) sum_{n=1}^{K} lambda^(n-1) A^(n)
without the leftover weight lambda^K on the longest estimator: the finite-horizon
correction term is left in (it vanishes only for infinite horizons)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["GAE-LAMBDA-MIXTURE", "GRID-GAE-EXPECTATION-EXACT-CRITIC"], "bug": "finite-horizon correction dropped"}


def _column(r, v, nv, term, trunc, gamma, lam):
    T = len(r)
    out = np.zeros(T)
    for t in range(T):
        end = t
        while not (term[end] or trunc[end]) and end < T - 1:
            end += 1
        K = end - t + 1
        delta = [r[j] + gamma * (0.0 if term[j] else (nv[j] if j == end else v[j + 1])) - v[j] for j in range(t, end + 1)]
        for n in range(1, K + 1):
            a_n = sum(gamma**l * delta[l] for l in range(n))
            out[t] += (1 - lam) * lam ** (n - 1) * a_n
    return out


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    if rewards.ndim == 1:
        adv = _column(rewards, values, next_values, terminated, truncated, gamma, lam)
    else:
        cols = [_column(*(a[:, j] for a in (rewards, values, next_values, terminated, truncated)), gamma, lam)
                for j in range(rewards.shape[1])]
        adv = np.stack(cols, axis=1)
    adv = adv.astype(rewards.dtype)
    return adv, adv + values

"""Correct variant: Welford's update one sample at a time, in plain Python floats, whatever the batches: the
statistics of a stream do not depend on its grouping. The explained variance with unbiased variances for both
terms (the divisor cancels); the diagnostics in explicit loops."""

import math

import numpy as np


def _welford(state, x):
    """(mean, m2, count) per feature, one sample x (D,) folded in."""
    mean, m2, count = state
    count += 1
    for d, value in enumerate(x):
        delta = value - mean[d]
        mean[d] += delta / count
        m2[d] += delta * (value - mean[d])
    return mean, m2, count


def running_moments(x, batch_end):
    D = x.shape[1]
    state = ([0.0] * D, [0.0] * D, 0)
    for row in x.tolist():
        state = _welford(state, row)
    mean, m2, count = state
    return np.array(mean), np.array(m2) / count, np.asarray(float(count))


def normalize_observations(obs, train_steps):
    T, N, D = obs.shape
    state = ([0.0] * D, [0.0] * D, 0)
    out = np.empty_like(obs)
    for t in range(T):
        if t < train_steps:
            for row in obs[t].tolist():
                state = _welford(state, row)
        mean, m2, count = state
        var = np.array(m2) / count if count else np.ones(D)
        out[t] = np.clip((obs[t] - np.array(mean)) / np.sqrt(var + 1e-8), -10.0, 10.0)
    return out


def scale_rewards(rewards, terminated, truncated, gamma):
    T, N = rewards.shape
    state = ([0.0], [0.0], 0)
    returns = [0.0] * N
    out = np.empty_like(rewards)
    for t in range(T):
        for j in range(N):
            returns[j] = gamma * returns[j] + rewards[t, j]
        for j in range(N):
            state = _welford(state, [returns[j]])
        var = state[1][0] / state[2]
        for j in range(N):
            out[t, j] = min(10.0, max(-10.0, rewards[t, j] / math.sqrt(var + 1e-8)))
            if terminated[t, j] or truncated[t, j]:
                returns[j] = 0.0
    return out


def diagnostic_approx_kl(logp_new, logp_old, minibatch_end=None):
    terms = [math.expm1(b - a) - (b - a) for a, b in zip(logp_old.tolist(), logp_new.tolist())]
    return np.asarray(math.fsum(terms) / len(terms))


def diagnostic_clip_fraction(logp_new, logp_old, clip_eps, minibatch_end=None):
    clipped = sum(abs(math.exp(b - a) - 1.0) > clip_eps for a, b in zip(logp_old.tolist(), logp_new.tolist()))
    return np.asarray(clipped / len(logp_new))


def diagnostic_explained_variance(values, returns):
    var_returns = np.var(returns, ddof=1)
    if var_returns == 0:
        return np.asarray(np.nan)
    return np.asarray(1.0 - np.var(returns - values, ddof=1) / var_returns)


def diagnostic_entropy(logits, minibatch_end=None):
    total = 0.0
    for row in logits.tolist():
        top = max(row)
        log_z = top + math.log(sum(math.exp(z - top) for z in row))
        total += -sum(math.exp(z - log_z) * (z - log_z) for z in row)
    return np.asarray(total / len(logits))

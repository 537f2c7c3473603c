"""Correct variant: every operation computes in float32 whatever it receives (declared RLSPEC_PRECISION), the
running statistics included: judged with float32 bounds, the long stream's drift within them."""

import numpy as np

RLSPEC_PRECISION = "float32"
f32 = np.float32


def _merge(mean, var, count, batch):
    b = f32(len(batch))
    batch_mean, batch_var = batch.mean(axis=0, dtype=f32), batch.var(axis=0, dtype=f32)
    total = f32(count + b)
    delta = batch_mean - mean
    mean = mean + delta * (b / total)
    var = (var * count + batch_var * b + delta * delta * (count * b / total)) / total
    return mean.astype(f32), var.astype(f32), total


def running_moments(x, batch_end):
    x = x.astype(f32)
    mean, var, count = np.zeros(x.shape[1], f32), np.ones(x.shape[1], f32), f32(0)
    start = 0
    for end in np.flatnonzero(batch_end):
        mean, var, count = _merge(mean, var, count, x[start:end + 1])
        start = end + 1
    return mean, var, np.asarray(count, dtype=f32)


def merge_moments(mean_a, var_a, count_a, mean_b, var_b, count_b):
    mean_a, var_a, mean_b, var_b = (a.astype(f32) for a in (mean_a, var_a, mean_b, var_b))
    count_a, count_b = f32(count_a), f32(count_b)
    total = count_a + count_b
    delta = mean_b - mean_a
    var = (var_a * count_a + var_b * count_b + delta * delta * (count_a * count_b / total)) / total
    return (mean_a + delta * (count_b / total)).astype(f32), var.astype(f32), np.asarray(total, dtype=f32)


def normalize_observations(obs, train_steps):
    obs = obs.astype(f32)
    mean, var, count = np.zeros(obs.shape[2], f32), np.ones(obs.shape[2], f32), f32(0)
    out = np.empty_like(obs)
    for t in range(len(obs)):
        if t < train_steps:
            mean, var, count = _merge(mean, var, count, obs[t])
        out[t] = np.clip((obs[t] - mean) / np.sqrt(var + f32(1e-8)), f32(-10), f32(10))
    return out


def scale_rewards(rewards, terminated, truncated, gamma):
    rewards = rewards.astype(f32)
    mean, var, count = np.zeros(1, f32), np.ones(1, f32), f32(0)
    returns = np.zeros(rewards.shape[1], f32)
    out = np.empty_like(rewards)
    for t in range(len(rewards)):
        returns = (f32(gamma) * returns + rewards[t]).astype(f32)
        mean, var, count = _merge(mean, var, count, returns[:, None])
        out[t] = np.clip(rewards[t] / np.sqrt(var + f32(1e-8)), f32(-10), f32(10))
        returns[terminated[t] | truncated[t]] = 0
    return out


def diagnostic_approx_kl(logp_new, logp_old, minibatch_end=None):
    log_r = (logp_new.astype(f32) - logp_old.astype(f32))
    return np.asarray(np.mean(np.exp(log_r) - f32(1) - log_r), dtype=f32)


def diagnostic_clip_fraction(logp_new, logp_old, clip_eps, minibatch_end=None):
    ratio = np.exp(logp_new.astype(f32) - logp_old.astype(f32))
    return np.asarray(np.mean(np.abs(ratio - f32(1)) > f32(clip_eps)), dtype=f32)


def diagnostic_explained_variance(values, returns):
    values, returns = values.astype(f32), returns.astype(f32)
    var_returns = np.var(returns)
    return np.asarray(np.nan if var_returns == 0 else f32(1) - np.var(returns - values) / var_returns, dtype=f32)


def diagnostic_entropy(logits, minibatch_end=None):
    z = logits.astype(f32)
    z = z - z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return np.asarray(np.mean(-(np.exp(log_p) * log_p).sum(axis=1)), dtype=f32)

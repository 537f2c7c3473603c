"""Correct variant: another merge formula in torch: the running state keeps M2 (the sum of squared deviations)
rather than the variance, the new mean is the count-weighted mean (n_a m_a + n_b m_b) / n, and every operation
receives and returns torch tensors. Observations and returns share one statistics object per stream; the
diagnostics use torch's Categorical and log-space comparisons."""

import torch

RLSPEC_ARRAY = "torch"


class _M2:
    def __init__(self, shape, dtype):
        self.mean = torch.zeros(shape, dtype=dtype)
        self.m2 = torch.zeros(shape, dtype=dtype)
        self.count = 0.0

    @property
    def var(self):
        return self.m2 / self.count if self.count > 0 else torch.ones_like(self.m2)

    def update(self, batch):
        b = batch.shape[0]
        batch_mean = batch.mean(dim=0)
        batch_m2 = ((batch - batch_mean) ** 2).sum(dim=0)
        total = self.count + b
        delta = batch_mean - self.mean
        self.mean = (self.mean * self.count + batch_mean * b) / total
        self.m2 = self.m2 + batch_m2 + delta**2 * (self.count * b / total)
        self.count = total


def running_moments(x, batch_end):
    stats = _M2(x.shape[1:], x.dtype)
    start = 0
    for end in torch.nonzero(batch_end).flatten().tolist():
        stats.update(x[start:end + 1])
        start = end + 1
    return stats.mean, stats.var, torch.tensor(stats.count, dtype=x.dtype)


def merge_moments(mean_a, var_a, count_a, mean_b, var_b, count_b):
    total = count_a + count_b
    delta = mean_b - mean_a
    m2 = var_a * count_a + var_b * count_b + delta**2 * (count_a * count_b / total)
    return (mean_a * count_a + mean_b * count_b) / total, m2 / total, torch.tensor(total, dtype=mean_a.dtype)


def normalize_observations(obs, train_steps):
    stats = _M2(obs.shape[2:], obs.dtype)
    out = []
    for t in range(obs.shape[0]):
        if t < train_steps:
            stats.update(obs[t])
        out.append(torch.clamp((obs[t] - stats.mean) / torch.sqrt(stats.var + 1e-8), -10.0, 10.0))
    return torch.stack(out)


def scale_rewards(rewards, terminated, truncated, gamma):
    stats = _M2((), rewards.dtype)
    returns = torch.zeros(rewards.shape[1], dtype=rewards.dtype)
    out = []
    for t in range(rewards.shape[0]):
        returns = returns * gamma + rewards[t]
        stats.update(returns)
        out.append(torch.clamp(rewards[t] / torch.sqrt(stats.var + 1e-8), -10.0, 10.0))
        returns = returns.masked_fill(terminated[t] | truncated[t], 0.0)
    return torch.stack(out)


def diagnostic_approx_kl(logp_new, logp_old, minibatch_end=None):
    log_r = logp_new - logp_old
    return (torch.exp(log_r) - 1 - log_r).mean()


def diagnostic_clip_fraction(logp_new, logp_old, clip_eps, minibatch_end=None):
    log_r = logp_new - logp_old
    low, high = torch.log1p(torch.tensor(-clip_eps, dtype=log_r.dtype)), torch.log1p(torch.tensor(clip_eps, dtype=log_r.dtype))
    return (log_r.clamp(low, high) != log_r).to(log_r.dtype).mean()


def diagnostic_explained_variance(values, returns):
    var_returns = torch.var(returns, correction=0)
    if var_returns == 0:
        return torch.tensor(float("nan"), dtype=values.dtype)
    return 1 - torch.var(returns - values, correction=0) / var_returns


def diagnostic_entropy(logits, minibatch_end=None):
    return torch.distributions.Categorical(logits=logits).entropy().mean()

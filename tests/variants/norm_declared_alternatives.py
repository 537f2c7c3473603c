"""Correct variant declaring the other values of the chapter's conventions: normalise with the statistics from
before each step, then update; the standard deviation clamped below at 1e-4 (TorchRL's form); the approximate KL
as k2; the diagnostics of the last minibatch; an explained variance regularised by float32's epsilon."""

import numpy as np

EPS = float(np.finfo(np.float32).eps)
RLSPEC_CONVENTIONS = {"normalization_order": "normalise-then-update", "normalization_eps_form": "max-std", "normalization_eps": 1e-4,
                      "approx_kl_estimator": "k2", "diagnostic_average": "last-minibatch", "explained_variance_eps": EPS}


class _RMS:
    def __init__(self, shape=()):
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), 0.0

    def update(self, x):
        delta = x.mean(axis=0) - self.mean
        total = self.count + len(x)
        self.var = (self.var * self.count + x.var(axis=0) * len(x) + delta**2 * self.count * len(x) / total) / total
        self.mean, self.count = self.mean + delta * len(x) / total, total

    def scale(self):
        return np.maximum(np.sqrt(self.var), 1e-4)


def normalize_observations(obs, train_steps):
    rms, out = _RMS(obs.shape[2:]), np.empty_like(obs)
    for t in range(len(obs)):
        out[t] = np.clip((obs[t] - rms.mean) / rms.scale(), -10.0, 10.0)
        if t < train_steps:
            rms.update(obs[t])
    return out


def scale_rewards(rewards, terminated, truncated, gamma):
    rms, returns, out = _RMS(), np.zeros(rewards.shape[1]), np.empty_like(rewards)
    for t in range(len(rewards)):
        returns = gamma * returns + rewards[t]
        out[t] = np.clip(rewards[t] / rms.scale(), -10.0, 10.0)
        rms.update(returns)
        returns = np.where(terminated[t] | truncated[t], 0.0, returns)
    return out


def _last(values, minibatch_end):
    ends = [] if minibatch_end is None else np.flatnonzero(minibatch_end)
    return values[(ends[-2] + 1 if len(ends) > 1 else 0):]


def diagnostic_approx_kl(logp_new, logp_old, minibatch_end=None):
    return np.asarray(np.mean(_last((logp_new - logp_old) ** 2 / 2, minibatch_end)))


def diagnostic_clip_fraction(logp_new, logp_old, clip_eps, minibatch_end=None):
    log_r = logp_new - logp_old
    return np.asarray(np.mean(_last((log_r > np.log1p(clip_eps)) | (log_r < np.log1p(-clip_eps)), minibatch_end)))


def diagnostic_explained_variance(values, returns):
    return np.asarray(1 - np.var(returns - values) / (np.var(returns) + EPS))


def diagnostic_entropy(logits, minibatch_end=None):
    z = logits - logits.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return np.asarray(np.mean(_last(-(np.exp(log_p) * log_p).sum(axis=1), minibatch_end)))

"""Correct variant with SB3's declarations: a VecNormalize-like object (RunningMeanStd starting at count 1e-4,
mean 0, variance 1; clip 10 for observations and rewards; epsilon 1e-8 inside the square root; the return
accumulator reset where done), and the diagnostics as PPO.train() logs them: per-minibatch values averaged over
the minibatches (declared). The explained variance is SB3's: NaN for constant returns."""

import numpy as np

RLSPEC_CONVENTIONS = {"moments_initial_count": 1e-4, "diagnostic_average": "minibatches"}


class RunningMeanStd:
    def __init__(self, shape=()):
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), 1e-4

    def update(self, arr):
        batch_mean, batch_var, batch_count = arr.mean(axis=0), arr.var(axis=0), arr.shape[0]
        delta = batch_mean - self.mean
        tot_count = self.count + batch_count
        m_2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / tot_count
        self.mean, self.var, self.count = self.mean + delta * batch_count / tot_count, m_2 / tot_count, tot_count


def running_moments(x, batch_end):
    rms = RunningMeanStd(x.shape[1:])
    for batch in np.split(x, np.flatnonzero(batch_end)[:-1] + 1):
        rms.update(batch)
    return rms.mean, rms.var, np.asarray(rms.count)


def normalize_observations(obs, train_steps):
    rms = RunningMeanStd(obs.shape[2:])
    out = np.empty_like(obs)
    for t, o in enumerate(obs):
        if t < train_steps:
            rms.update(o)
        out[t] = np.clip((o - rms.mean) / np.sqrt(rms.var + 1e-8), -10.0, 10.0)
    return out


def scale_rewards(rewards, terminated, truncated, gamma):
    rms, returns = RunningMeanStd(), np.zeros(rewards.shape[1])
    out = np.empty_like(rewards)
    for t, r in enumerate(rewards):
        returns = returns * gamma + r
        rms.update(returns)
        out[t] = np.clip(r / np.sqrt(rms.var + 1e-8), -10.0, 10.0)
        returns[terminated[t] | truncated[t]] = 0
    return out


def _per_minibatch(values, minibatch_end):
    if minibatch_end is None:
        return np.mean(values)
    return np.mean([np.mean(part) for part in np.split(values, np.flatnonzero(minibatch_end)[:-1] + 1)])


def diagnostic_approx_kl(logp_new, logp_old, minibatch_end=None):
    log_ratio = logp_new - logp_old
    return np.asarray(_per_minibatch((np.exp(log_ratio) - 1) - log_ratio, minibatch_end))


def diagnostic_clip_fraction(logp_new, logp_old, clip_eps, minibatch_end=None):
    return np.asarray(_per_minibatch((np.abs(np.exp(logp_new - logp_old) - 1) > clip_eps).astype(float), minibatch_end))


def diagnostic_explained_variance(values, returns):
    var_y = np.var(returns)
    return np.asarray(np.nan if var_y == 0 else 1 - np.var(returns - values) / var_y)


def diagnostic_entropy(logits, minibatch_end=None):
    z = logits - logits.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return np.asarray(_per_minibatch(-(np.exp(log_p) * log_p).sum(axis=1), minibatch_end))

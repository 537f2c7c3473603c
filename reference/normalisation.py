"""Running normalisation and the diagnostics of a PPO update.

Running moments (Chan, Golub and LeVeque 1983, "Algorithms for Computing the Sample Variance", the
pairwise update; Welford 1962 is its one-sample case). Statistics (mean m, population variance v, count n)
of two disjoint samples combine into those of their union:

    n = n_a + n_b      delta = m_b - m_a      m = m_a + delta n_b / n
    M2 = n_a v_a + n_b v_b + delta^2 n_a n_b / n      v = M2 / n

so folding batches in one at a time, in any grouping, gives the statistics of the concatenation. The
running statistics start as a pseudo-batch of count INITIAL_COUNT with mean 0 and variance 1 (0: nothing).

Observation normalisation (the PPO implementations' VecNormalize; Huang et al. 2022, "The 37
Implementation Details of PPO"): each training step updates the statistics with the N environments'
observations, then normalises them, clip((x - m) / sqrt(v + EPS), -CLIP, CLIP); evaluation steps use the
frozen statistics.

Reward scaling (Engstrom et al. 2020, arXiv:2005.12729, §3 and Algorithm 1): per environment the
discounted return R_t = gamma R_{t-1} + r_t (reset to 0 after an episode ends, terminated or truncated);
the reward is divided by the running std of R, not centred: clip(r_t / sqrt(var_R + EPS), -CLIP, CLIP).

Diagnostics, over the samples of an update: approx KL(pi_old || pi_new) = mean(r - 1 - log r) (k3,
Schulman 2020, "Approximating KL Divergence"), the clip fraction mean(|r - 1| > eps), the explained
variance 1 - Var[R - V] / Var[R], and the mean entropy of the batch's categorical policies.
"""

from __future__ import annotations

import numpy as np

INITIAL_COUNT = 0.0  # the statistics of the data alone
EPS = 1e-8  # inside the square root: sqrt(var + EPS)
OBSERVATION_CLIP = 10.0
REWARD_CLIP = 10.0


def merge_moments(mean_a, var_a, count_a, mean_b, var_b, count_b):
    """Chan et al.'s pairwise update; numpy (D,) means and variances, scalar counts -> ((D,), (D,), ())."""
    count = count_a + count_b
    delta = mean_b - mean_a  # (D,)
    mean = mean_a + delta * (count_b / count)
    m2 = var_a * count_a + var_b * count_b + delta**2 * (count_a * count_b / count)
    return mean, m2 / count, np.asarray(float(count))


class RunningMoments:
    """Running mean, population variance and count per feature, from the initial pseudo-batch."""

    def __init__(self, shape, count: float = INITIAL_COUNT):
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), count

    def update(self, batch):
        """Fold in a batch of rows (B, *shape)."""
        batch_mean, batch_var = batch.mean(axis=0), batch.var(axis=0)  # population variance (ddof 0)
        self.mean, self.var, count = merge_moments(self.mean, self.var, self.count, batch_mean, batch_var, len(batch))
        self.count = float(count)

    def normalise(self, x):
        return (x - self.mean) / np.sqrt(self.var + EPS)


def running_moments(x, batch_end):
    """The statistics after folding in the batches of x (N, D) that end where batch_end (N,) is true."""
    stats = RunningMoments(x.shape[1:])
    start = 0
    for end in np.flatnonzero(batch_end):
        stats.update(x[start:end + 1])
        start = end + 1
    return stats.mean, stats.var, np.asarray(stats.count)


def normalize_observations(obs, train_steps):
    """obs (T, N, D): update with each training step's N observations, then normalise; freeze after train_steps."""
    stats = RunningMoments(obs.shape[2:])  # one set of statistics shared by the N environments
    out = np.empty_like(obs)
    for t in range(len(obs)):
        if t < train_steps:
            stats.update(obs[t])  # (N, D): one batch
        out[t] = np.clip(stats.normalise(obs[t]), -OBSERVATION_CLIP, OBSERVATION_CLIP)
    return out


def scale_rewards(rewards, terminated, truncated, gamma):
    """rewards (T, N) divided by the running std of the discounted return, reset at every episode end."""
    stats = RunningMoments(())
    returns = np.zeros(rewards.shape[1])  # (N,) the accumulator R
    out = np.empty_like(rewards)
    for t in range(len(rewards)):
        returns = gamma * returns + rewards[t]
        stats.update(returns)  # (N,): one batch of N returns
        out[t] = np.clip(rewards[t] / np.sqrt(stats.var + EPS), -REWARD_CLIP, REWARD_CLIP)  # not centred
        returns = np.where(terminated[t] | truncated[t], 0.0, returns)  # the next step starts a new episode
    return out


def diagnostic_approx_kl(logp_new, logp_old, minibatch_end=None):
    """mean(r - 1 - log r) with log r = logp_new - logp_old (B,): k3 of KL(pi_old || pi_new), over every sample."""
    log_r = logp_new - logp_old
    return np.asarray(np.mean(np.expm1(log_r) - log_r))


def diagnostic_clip_fraction(logp_new, logp_old, clip_eps, minibatch_end=None):
    """The fraction of samples with |r - 1| > clip_eps (strictly: a ratio on the boundary is not clipped)."""
    ratio = np.exp(logp_new - logp_old)  # (B,)
    return np.asarray(np.mean(np.abs(ratio - 1.0) > clip_eps))


def diagnostic_explained_variance(values, returns):
    """1 - Var[R - V] / Var[R] (population variances); NaN where the returns are constant."""
    var_returns = np.var(returns)
    if var_returns == 0:
        return np.asarray(np.nan)
    return np.asarray(1.0 - np.var(returns - values) / var_returns)


def diagnostic_entropy(logits, minibatch_end=None):
    """The mean over rows of H(softmax(logits)) in nats; logits (B, A), finite."""
    log_p = logits - logits.max(axis=1, keepdims=True)
    log_p = log_p - np.log(np.exp(log_p).sum(axis=1, keepdims=True))  # (B, A) log-softmax, finite
    return np.asarray(np.mean(-(np.exp(log_p) * log_p).sum(axis=1)))

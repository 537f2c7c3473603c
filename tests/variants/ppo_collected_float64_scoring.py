"""Correct variant that samples with numpy and scores in float64: the buffer holds the draw and log pi_old in the
policy's dtype (rounded once when stored), the loss re-scores the stored draw in float64 and takes the ratio in
float64. The squashed log-density uses log1p(-tanh(u)^2) where tanh is far from 1 and the stable form elsewhere."""

import numpy as np
import torch

RLSPEC_ARRAY = "numpy"  # the operation is a torch one: its tensors are read into numpy here


def _log_prob(family, loc, scale, sample):
    if family == "categorical":
        shifted = loc - loc.max(-1, keepdims=True)
        log_pi = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        return np.take_along_axis(log_pi, sample[:, None].astype(np.int64), -1)[:, 0]
    z = (sample - loc) / scale
    log_normal = np.sum(-0.5 * z * z - np.log(scale) - 0.5 * np.log(2 * np.pi), -1)
    if family == "gaussian":
        return log_normal
    t = np.tanh(sample)
    log_det = np.where(np.abs(sample) < 1.0, np.log1p(-t * t), 2.0 * (np.log(2.0) - sample - np.logaddexp(0.0, -2.0 * sample)))
    return log_normal - log_det.sum(-1)


def ppo_collected_ratios(family, loc, scale, seed):
    loc, scale = loc.numpy(), None if scale is None else scale.numpy()
    dtype = loc.dtype
    rng = np.random.default_rng(seed)
    loc64 = np.asarray(loc, np.float64)
    scale64 = None if scale is None else np.asarray(scale, np.float64)
    if family == "categorical":
        p = np.exp(loc64 - loc64.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        sample = np.array([rng.choice(len(row), p=row) for row in p])
    else:
        sample = (loc64 + scale64 * rng.standard_normal(loc.shape)).astype(dtype)  # stored in the policy's dtype
    logp_old = _log_prob(family, loc64, scale64, sample.astype(np.float64)).astype(dtype)  # stored in the policy's dtype
    new = _log_prob(family, loc64, scale64, sample.astype(np.float64))
    return torch.from_numpy(np.exp(new - logp_old.astype(np.float64)))

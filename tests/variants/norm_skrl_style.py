"""Correct variant with skrl's RunningStandardScaler's declarations (but a population variance per batch): the
statistics start at count 1 (mean 0, variance 1), the epsilon is added to the standard deviation, the output is
clipped to [-5, 5]; computed in torch float64 with float32 outputs as skrl's preprocessor returns them."""

import torch

RLSPEC_ARRAY = "torch"
RLSPEC_CONVENTIONS = {"moments_initial_count": 1.0, "normalization_eps_form": "std", "observation_clip": 5.0}


class Scaler:
    def __init__(self, size, dtype=torch.float64):
        self.mean, self.var, self.count = torch.zeros(size, dtype=dtype), torch.ones(size, dtype=dtype), torch.ones((), dtype=dtype)

    def update(self, x):
        x = x.double()
        batch_mean, batch_var, n = x.mean(dim=0), x.var(dim=0, correction=0), x.shape[0]
        delta = batch_mean - self.mean
        total = self.count + n
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.mean, self.var, self.count = self.mean + delta * n / total, m2 / total, total

    def __call__(self, x, train=False):
        if train:
            self.update(x)
        return torch.clamp((x.float() - self.mean.float()) / (torch.sqrt(self.var.float()) + 1e-8), -5.0, 5.0)


def running_moments(x, batch_end):
    scaler = Scaler(x.shape[1])
    start = 0
    for end in torch.nonzero(batch_end).flatten().tolist():
        scaler.update(x[start:end + 1])
        start = end + 1
    return scaler.mean, scaler.var, scaler.count


def normalize_observations(obs, train_steps):
    scaler = Scaler(obs.shape[2])
    return torch.stack([scaler(o, train=t < train_steps) for t, o in enumerate(obs)])

"""The three KL estimators computed in float32 (torch), returned as float64."""

import torch

RLSPEC_ARRAY = "torch"


def kl_estimate(logp_sampler, logp_other, kind):
    log_r = (logp_other.float() - logp_sampler.float())
    if kind == "k1":
        out = -log_r
    elif kind == "k2":
        out = log_r ** 2 / 2
    else:
        out = torch.expm1(log_r) - log_r
    return out.double()

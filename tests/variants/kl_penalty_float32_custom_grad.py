"""Correct variant computing in float32 (OpenRLHF casts log-probs with .float()) without clamps: the
ratio formed as r = exp(log_ratio), k3 = r - 1 - log_ratio, and the straight-through kinds written with
an explicit autograd.Function whose backward is w (logp - logp_ref). Judged at float32."""

import torch

RLSPEC_ARRAY = "torch"
RLSPEC_PRECISION = "float32"


class _StraightThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logp, value, log_ratio, weight):
        ctx.save_for_backward(log_ratio, weight)
        return value.clone()

    @staticmethod
    def backward(ctx, grad):
        log_ratio, weight = ctx.saved_tensors
        return grad * weight * log_ratio, None, None, None  # d (w k2) / d logp = w (logp - logp_ref)


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    lp, ref = logp.float(), logp_ref.float()
    x = ref - lp  # log(pi_ref / pi)
    base = kind.rstrip("+")
    if base == "k1":
        value = -x
    elif base == "k2":
        value = 0.5 * x * x
    else:
        value = torch.exp(x) - 1 - x
    if not kind.endswith("+"):
        return value
    weight = torch.ones_like(x) if logp_old is None else torch.exp(lp - logp_old.float()).detach()
    return _StraightThrough.apply(lp, value.detach(), (lp - ref).detach(), weight)

"""Correct variant: vectorised torch group advantages with TRL's epsilon (declared), no Python loop over
groups: ids mapped to 0..k-1 with torch.unique, per-group sums with index_add_ (scatter), the centred
values squared and summed again (two passes), NaN scores masked out of every statistic."""

import torch

RLSPEC_ARRAY = "torch"
RLSPEC_CONVENTIONS = {"group_std_eps": 1e-4}


def group_advantages(scores, groups, kind):
    _, inverse = torch.unique(groups, return_inverse=True)
    k = int(inverse.max()) + 1 if len(inverse) else 0
    scorable = ~torch.isnan(scores)
    r = torch.where(scorable, scores, torch.zeros_like(scores))
    w = scorable.to(scores.dtype)
    count = torch.zeros(k, dtype=scores.dtype).index_add_(0, inverse, w)
    total = torch.zeros(k, dtype=scores.dtype).index_add_(0, inverse, r)
    n = count[inverse]
    mean = total[inverse] / n.clamp(min=1)
    centred = (r - mean) * w
    squares = torch.zeros(k, dtype=scores.dtype).index_add_(0, inverse, centred**2)[inverse]
    if kind == "grpo":
        std = torch.sqrt(squares / (n - 1).clamp(min=1))
        out = centred / (std + 1e-4)
    elif kind == "rloo":
        out = centred * n / (n - 1).clamp(min=1)
    elif kind == "mean":
        out = centred
    else:
        raise ValueError(kind)
    return torch.where((n > 1) & scorable, out, torch.zeros_like(out))

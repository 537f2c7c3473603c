"""Correct variant declaring verl-like and other conventions: a Python loop over the groups (dict of
lists, verl's id2score), population std (ddof 0, declared), OpenRLHF's eps 1e-9, a singleton normalised
with mean 0 and std 1 (verl, declared 'score'), NaN passed through for unscorable samples (declared);
RLOO written as (sum - r) / (n - 1)."""

import math
from collections import defaultdict

import numpy as np

RLSPEC_CONVENTIONS = {"group_std_ddof": 0, "group_std_eps": 1e-9, "group_singleton": "score", "group_unscorable": "nan"}


def group_advantages(scores, groups, kind):
    members = defaultdict(list)
    for i, (s, g) in enumerate(zip(scores.tolist(), groups.tolist())):
        if not math.isnan(s):
            members[g].append(i)
    out = np.full(len(scores), np.nan)
    for idx in members.values():
        r = scores[idx]
        n = len(r)
        if n == 1:
            mean, std, others = 0.0, 1.0, np.zeros(1)
        else:
            mean, std = float(np.mean(r)), float(np.std(r))  # numpy's default: ddof 0
            others = (np.sum(r) - r) / (n - 1)
        if kind == "grpo":
            out[idx] = (r - mean) / (std + 1e-9)
        elif kind == "rloo":
            out[idx] = r - others
        else:
            out[idx] = r - mean
    return out

"""Correct variant computing in float32: the batch sorted by id (a stable argsort) and split into
segments with np.add.reduceat, statistics in single precision, results scattered back to the original
order. Judged with float32 tolerances (RLSPEC_PRECISION)."""

import numpy as np

RLSPEC_PRECISION = "float32"


def group_advantages(scores, groups, kind):
    order = np.argsort(groups, kind="stable")
    r_sorted = scores[order].astype(np.float32)
    g_sorted = groups[order]
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]])
    out_sorted = np.zeros(len(scores), dtype=np.float32)
    bounds = list(starts) + [len(scores)]
    for start, stop in zip(bounds[:-1], bounds[1:]):
        segment = r_sorted[start:stop]
        keep = ~np.isnan(segment)
        r = segment[keep]
        n = len(r)
        if n < 2:
            continue
        mean = np.add.reduceat(r, [0])[0] / np.float32(n)
        c = r - mean
        if kind == "grpo":
            std = np.sqrt(np.sum(c * c) / np.float32(n - 1))
            a = c / (std + np.float32(1e-6))
        elif kind == "rloo":
            a = c * np.float32(n) / np.float32(n - 1)
        else:
            a = c
        values = np.zeros(len(segment), dtype=np.float32)
        values[keep] = a
        out_sorted[start:stop] = values
    out = np.empty_like(out_sorted)
    out[order] = out_sorted
    return out

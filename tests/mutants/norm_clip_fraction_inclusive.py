"""Mutant: the clip fraction counts |r - 1| >= eps, so a ratio on the boundary counts as clipped (at eps = 0 every
sample of the first minibatch, where r = 1)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["CLIP-FRACTION-STRICT"], "bug": "clip fraction with >= instead of >"}


def diagnostic_clip_fraction(logp_new, logp_old, clip_eps, minibatch_end=None):
    return np.asarray(np.mean(np.abs(np.exp(logp_new - logp_old) - 1.0) >= clip_eps))

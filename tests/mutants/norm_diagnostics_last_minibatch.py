"""Mutant: each diagnostic is the last minibatch's value (a variable overwritten inside the minibatch loop), while
the candidate declares the default averaging over every sample."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["APPROX-KL-ESTIMATOR", "CLIP-FRACTION-STRICT", "ENTROPY-BATCH-MEAN"],
                 "bug": "a diagnostic from the last minibatch only, averaging undeclared"}


def _last(minibatch_end, size):
    if minibatch_end is None:
        return slice(0, size)
    ends = np.flatnonzero(minibatch_end)
    return slice(0 if len(ends) < 2 else ends[-2] + 1, size)


def diagnostic_approx_kl(logp_new, logp_old, minibatch_end=None):
    last = _last(minibatch_end, len(logp_new))
    log_r = logp_new[last] - logp_old[last]
    return np.asarray(np.mean(np.expm1(log_r) - log_r))


def diagnostic_clip_fraction(logp_new, logp_old, clip_eps, minibatch_end=None):
    last = _last(minibatch_end, len(logp_new))
    return np.asarray(np.mean(np.abs(np.exp(logp_new[last] - logp_old[last]) - 1.0) > clip_eps))


def diagnostic_entropy(logits, minibatch_end=None):
    z = logits[_last(minibatch_end, len(logits))]
    log_p = z - z.max(axis=1, keepdims=True)
    log_p = log_p - np.log(np.exp(log_p).sum(axis=1, keepdims=True))
    return np.asarray(np.mean(-(np.exp(log_p) * log_p).sum(axis=1)))

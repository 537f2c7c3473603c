"""Mutant: the log ratio is taken the other way round, log r = logp_old - logp_new, inside k3: the mean estimates
sum_x p(x) (p(x) / q(x) - 1 - log p(x) / q(x)), not KL(pi_old || pi_new)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["APPROX-KL-DIRECTION"], "bug": "the approximate KL's log ratio reversed"}


def diagnostic_approx_kl(logp_new, logp_old, minibatch_end=None):
    log_r = logp_old - logp_new
    return np.asarray(np.mean(np.expm1(log_r) - log_r))

"""Mutant: the approximate KL the update logs is the mean of k1 = -log r (PPO's old_approx_kl) while the
candidate declares the default k3: a log that reads 0 for ratios 2 and 1/2, where k3 says 1/4."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["APPROX-KL-ESTIMATOR"], "bug": "approx KL k1 where the log says k3"}


def diagnostic_approx_kl(logp_new, logp_old, minibatch_end=None):
    return np.asarray(np.mean(logp_old - logp_new))

"""Mutant: the actor is delayed but the target networks are updated at every critic step (the target critic
update not delayed with the actor, google-deepmind/acme PR #194's subject; TD3's Algorithm 1 updates them
together under `if t mod d`)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TD3-DELAYED-UPDATES"], "bug": "H5 td3-target-critic-not-delayed"}


def td3_actor_update_steps(gradient_steps, policy_delay):
    n = sum(gradient_steps)
    actor = (np.arange(1, n + 1) % policy_delay == 0).astype(np.float64)
    return actor, np.ones(n)

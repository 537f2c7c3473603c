"""Mutant: TD3's delay is tested on a counter that restarts in every call (for gradient_step in range(k): if
gradient_step % policy_delay == 0), so with one critic step per call the actor is updated at every step
(instadeepai/Mava PR #1208: the delay gated on a counter that does not advance per gradient step;
sweetice/Deep-reinforcement-learning-with-pytorch #8)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TD3-DELAYED-UPDATES"], "bug": "H4 td3-policy-delay-not-respected (counter restarts in every call)"}


def td3_actor_update_steps(gradient_steps, policy_delay):
    due = np.concatenate([np.arange(k) % policy_delay == 0 for k in gradient_steps]).astype(np.float64)
    return due, due.copy()

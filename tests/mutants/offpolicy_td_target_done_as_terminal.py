"""Mutant: the TD target masks with done = terminated or truncated, so a time-limit end is treated as the end of
the MDP and loses its bootstrap (SB3 before handle_timeout_termination, TorchRL losses before they read
("next", "terminated") instead of "done"; Pardo et al. 2018, arXiv:1712.00378)."""

import numpy as np

RLSPEC_MUTANT = {"clauses": ["TD-TARGET-TRUNCATION-BOOTSTRAP"], "bug": "H1 off-policy-timeout-stored-as-terminal (truncation treated as terminal in the TD target)"}


def td_target(rewards, next_q, terminated, truncated, gamma):
    done = np.logical_or(terminated, truncated)
    return rewards + gamma * np.where(done, 0.0, next_q)

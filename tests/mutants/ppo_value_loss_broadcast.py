"""Mutant: the critic's (B, 1) output compared with (B,) returns: broadcasting makes a (B, B) matrix
of errors, every value against every return (why SB3 flattens its values; torch only warns)."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-VALUE-LOSS"], "bug": "values (B, 1) broadcast against returns (B,) in the value loss"}


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    values = values.view(-1, 1)  # as a critic head returns them
    return ((values - returns) ** 2).mean()

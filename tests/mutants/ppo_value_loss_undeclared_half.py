"""Mutant: an extra 0.5 on the squared error that the candidate does not declare (Brax's value loss
carries an extra 0.5 * 0.5; bug B7). Declaring value_loss_factor 0.5 would make it conform."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-VALUE-LOSS"], "bug": "B7 brax-ppo-advantage-not-gae-and-truncation-dropped (undeclared 0.5 factor on the value loss)"}


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    return 0.5 * ((values - returns) ** 2).mean()

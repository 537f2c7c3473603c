"""Mutant: the temperature loss is written in alpha, -mean(exp(log_alpha) (log pi + H_target)) (CleanRL's
sac_continuous_action.py), without declaring alpha_loss_parameter = "alpha": its gradient is alpha times the
log-alpha form's, so the learning rate a user tuned for one form is wrong for the other."""

import torch

RLSPEC_MUTANT = {"clauses": ["SAC-TEMPERATURE-LOSS"], "bug": "H7 sac-temperature-loss-log-alpha-or-alpha (the alpha form, undeclared)"}


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    if target_entropy is None:
        target_entropy = -float(action_dim)
    return (-torch.exp(log_alpha) * (log_prob.detach() + target_entropy)).mean()

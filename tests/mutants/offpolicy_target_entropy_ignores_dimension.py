"""Mutant: the default target entropy is a constant -1 whatever the action dimension (a one-dimensional default
carried over), not -|A| (arXiv:1812.05905 §5; SB3's and TorchRL's target_entropy = "auto"): on a 6-dimensional
task the temperature is driven to keep six times too much entropy."""

RLSPEC_MUTANT = {"clauses": ["SAC-TARGET-ENTROPY-DEFAULT"], "bug": "default target entropy ignores the action dimension"}


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    if target_entropy is None:
        target_entropy = -1.0
    return -(log_alpha * (log_prob.detach() + target_entropy)).mean()

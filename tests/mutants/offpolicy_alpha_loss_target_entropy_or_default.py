"""Mutant: the default target entropy is taken with `or`: target_entropy = target_entropy or -action_dim, so a target
entropy of exactly 0 (a legitimate choice: the policy's entropy pushed towards 0 nats) is replaced by the default -|A|.
An edge of the contract (target_entropy 0, where `x or default` turns a coefficient of 0 into the default)."""

RLSPEC_MUTANT = {"clauses": ["SAC-TEMPERATURE-LOSS"], "bug": "target_entropy = target_entropy or -action_dim: a target entropy of 0 becomes -|A|"}


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    target_entropy = target_entropy or -float(action_dim)
    return -(log_alpha * (log_prob.detach() + target_entropy)).mean()

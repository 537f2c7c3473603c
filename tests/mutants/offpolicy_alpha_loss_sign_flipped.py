"""Mutant: the temperature loss is +mean(log_alpha (log pi + H_target)): descending it raises alpha when the
policy's entropy is already above the target, so the temperature runs away instead of holding the entropy at
H_target (arXiv:1812.05905 §5)."""

RLSPEC_MUTANT = {"clauses": ["SAC-TEMPERATURE-LOSS"], "bug": "temperature loss with the wrong sign"}


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    if target_entropy is None:
        target_entropy = -float(action_dim)
    return (log_alpha * (log_prob.detach() + target_entropy)).mean()

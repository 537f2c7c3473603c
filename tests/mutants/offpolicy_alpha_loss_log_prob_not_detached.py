"""Mutant: log_prob is not detached in the temperature loss, so its backward pushes the policy towards the target
entropy through alpha's objective: the alpha gradient leaks into the policy (softlearning wraps the term in
tf.stop_gradient(log_pis + target_entropy), SB3 2.9.2 writes `(log_prob + self.target_entropy).detach()`)."""

RLSPEC_MUTANT = {"clauses": ["SAC-TEMPERATURE-NO-POLICY-GRADIENT"], "bug": "alpha gradient leaking into the policy"}


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    if target_entropy is None:
        target_entropy = -float(action_dim)
    return -(log_alpha * (log_prob + target_entropy)).mean()

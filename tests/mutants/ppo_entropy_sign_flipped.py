"""Mutant: the entropy bonus added to the minimised loss with a plus sign (omnisafe PR #133: "PPO on
the main branch minimizes entropy"; SB3 #127 for the -log pi estimate)."""

RLSPEC_MUTANT = {"clauses": ["PPO-ENTROPY-BONUS-SIGN"], "bug": "C11 entropy-bonus-sign"}


def ppo_entropy_loss(entropy, coef):
    return coef * entropy.mean()

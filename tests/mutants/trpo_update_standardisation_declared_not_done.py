"""Mutant: the candidate declares that trpo_update standardises its advantages (as sb3-contrib, skrl and
Tianshou do by default) but steps on them as given; where the batch's mean advantage is not 0 the
surrogate's gradient, and so the natural step and the line search, differ from the declared rule."""

from rlspec.reference import trpo as ref

RLSPEC_CONVENTIONS = {"trpo_advantage_normalization": "batch"}
RLSPEC_MUTANT = {"clauses": ["TRPO-UPDATE-TRUST-REGION"], "bug": "declared advantage standardisation not applied"}


def trpo_update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks):
    return ref.trpo_update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks)

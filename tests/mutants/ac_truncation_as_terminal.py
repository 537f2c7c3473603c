"""Mutant (bug B4's class, in the actor-critic losses): terminations and truncations are OR-ed into one
done flag and the bootstrap is masked by it, so a step cut by a time limit loses V(final observation)."""

import torch

RLSPEC_MUTANT = {"clauses": ["AC-TRUNCATION-BOOTSTRAP"], "bug": "B4 truncation-as-termination"}


def actor_critic_losses(logp, values, next_values, rewards, terminated, truncated, gamma):
    done = (terminated | truncated).to(values.dtype)
    delta = rewards + gamma * (1.0 - done) * next_values.detach() - values
    return -(logp * delta.detach()).mean(), delta.pow(2).mean()

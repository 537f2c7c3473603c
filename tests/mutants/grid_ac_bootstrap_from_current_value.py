"""Mutant: one-step actor-critic that bootstraps from V(s_t), the value before the action, instead of
V(s_{t+1}) (the rl_games / rsl_rl time-out approximation of bug B6, applied to every step): the
TD error becomes r + (gamma - 1) V(s_t) and no longer depends on where the action led."""

import torch

RLSPEC_MUTANT = {"clauses": ["GRID-ACTOR-CRITIC-TD-EXPECTATION"], "bug": "B6 timeout-bootstrap-uses-V(s_t)-not-V(s_{t+1})"}


def actor_critic_losses(logp, values, next_values, rewards, terminated, truncated, gamma):
    bootstrap = torch.where(terminated.bool(), 0.0, values.detach())  # BUG: V(s_t), not next_values
    delta = rewards + gamma * bootstrap - values
    return -(logp * delta.detach()).mean(), delta.pow(2).mean()

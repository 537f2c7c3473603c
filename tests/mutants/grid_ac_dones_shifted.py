"""Mutant: one-step actor-critic whose episode-end flags sit one slot late in the batch (bug B13,
RoboVerse PR #814: dones[step] written before acting and again after env.step(), so the mask is
shifted by one). Each transition is masked with its predecessor's flag: a terminal step bootstraps
from the value of the terminal observation and the step after it loses its bootstrap."""

import torch

RLSPEC_MUTANT = {"clauses": ["GRID-ACTOR-CRITIC-TD-EXPECTATION"], "bug": "B13 dones-buffer-written-twice"}


def actor_critic_losses(logp, values, next_values, rewards, terminated, truncated, gamma):
    done = torch.roll(terminated.to(values.dtype), 1)  # BUG: dones[t] holds the flag of step t - 1
    done[0] = 0.0
    delta = rewards + gamma * (1.0 - done) * next_values.detach() - values
    return -(logp * delta.detach()).mean(), delta.pow(2).mean()

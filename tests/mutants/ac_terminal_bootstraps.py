"""Mutant: the TD target bootstraps from next_values on terminated steps too (the (1 - done) mask
on the bootstrap is missing), so the value of a terminal state leaks into the last step's error."""

RLSPEC_MUTANT = {"clauses": ["AC-TD-ERROR"], "bug": "terminal step bootstraps (the (1 - done) mask missing)"}


def actor_critic_losses(logp, values, next_values, rewards, terminated, truncated, gamma):
    delta = rewards + gamma * next_values.detach() - values
    return -(logp * delta.detach()).mean(), delta.pow(2).mean()

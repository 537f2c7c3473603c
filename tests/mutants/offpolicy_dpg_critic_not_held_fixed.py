"""Mutant: the actor loss calls the critic with its live parameters, so backward() writes -dQ(s, mu(s))/dphi into
the critic's gradient; when one optimizer steps the sum of the actor and critic losses (TorchRL's pattern, or a
shared Adam over both networks), the critic is trained to raise its own value at the actor's actions."""

RLSPEC_MUTANT = {"clauses": ["DPG-ACTOR-CRITIC-HELD-FIXED"], "bug": "H8 ddpg-actor-and-critic-updated-together (the actor loss reaches the critic)"}


def dpg_actor_loss(actor, critic, obs):
    return -critic(obs, actor(obs)).mean()

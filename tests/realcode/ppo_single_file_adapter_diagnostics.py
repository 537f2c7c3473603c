"""The same adapter as ppo_single_file_adapter.py, written the way the diagnostics protocol (rlspec before
the update loop was observed) required: ``ppo_update`` had to return the first minibatch's ratios and
indices, every KL the stop rule compared and the number of epochs, none of which ``update`` exposes. So
the adapter instruments the agent to capture every evaluation, replays the code's ``torch.randperm`` under
a seeded global generator to learn the minibatches, and recomputes the KL the code compared. Kept (and
tested) to show the difference in docs/adapting-real-code.md: the dict is still accepted and checked.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import ppo_single_file as code  # noqa: E402

RLSPEC_ARRAY = "torch"
RLSPEC_CONVENTIONS = {"advantage_normalization": "minibatch", "value_loss_factor": 0.5, "value_clipping": "clip_eps"}


class RecordingAgentView:
    """The suite's policy under the agent's names, keeping every log-probability it computed."""

    def __init__(self, policy):
        self.policy, self.log_probs = policy, []

    def get_action_and_value(self, x, action):
        value, log_prob, entropy = self.policy.evaluate_actions(x, action)
        self.log_probs.append(log_prob.detach().clone())
        return action, log_prob, entropy, value

    def parameters(self):
        return self.policy.parameters()


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size = len(obs), config["minibatch_size"]
    args = code.Args(update_epochs=config["epochs"], minibatch_size=size, batch_size=n, clip_coef=config["clip_eps"],
                     vf_coef=config["vf_coef"], ent_coef=config["ent_coef"], max_grad_norm=config["max_grad_norm"],
                     target_kl=config["target_kl"], norm_adv=config["normalize_advantages"])
    agent = RecordingAgentView(policy)
    torch.manual_seed(config["seed"])  # so that the permutations update() draws can be replayed
    code.update(agent, optimizer, obs, logp_old, actions, advantages, returns, values_old, args)
    torch.manual_seed(config["seed"])
    per_epoch = -(-n // size)
    epochs = len(agent.log_probs) // per_epoch
    orders = [torch.randperm(n) for _ in range(epochs)]  # the replay: the same draws, in the same order
    minibatches = [order[start : start + size] for order in orders for start in range(0, n, size)]
    first = minibatches[0]
    ratios = (agent.log_probs[0] - logp_old[first]).exp()
    approx_kl = []
    for epoch in range(epochs):  # the code compares the last minibatch's k3 after each epoch
        last = epoch * per_epoch + per_epoch - 1
        log_ratio = agent.log_probs[last] - logp_old[minibatches[last]]
        approx_kl.append(float(((log_ratio.exp() - 1) - log_ratio).mean()))
    return {"ratios": ratios, "indices": first, "approx_kl": approx_kl, "epochs": epochs}

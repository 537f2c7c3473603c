"""rlspec adapter for tests/realcode/ppo_single_file.py's ``update``: a name mapping, nothing else.

The protocol hands ``ppo_update`` a policy module, an optimizer and a stored batch; the single-file code
calls its agent ``agent.get_action_and_value(obs, action)`` and reads its settings from ``Args``. The
adapter renames: the suite's ``policy.evaluate_actions`` answers under the agent's method name, the
config's keys become the Args fields, and the code's own choices are declared. The suite watches its own
module and optimizer, so ``update`` runs as written (its ``torch.randperm``, its logs returned).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the code under test lives beside this file (in a project: its package)
import ppo_single_file as code  # noqa: E402

RLSPEC_ARRAY = "torch"
RLSPEC_CONVENTIONS = {
    "advantage_normalization": "minibatch",  # mb_advantages normalised inside the minibatch loop
    "value_loss_factor": 0.5,  # v_loss = 0.5 * mean((V - R)^2)
    "value_clipping": "clip_eps",  # clip_vloss (on by default) clips V - V_old by clip_coef
}


class AgentView:
    """The suite's policy under the agent's names."""

    def __init__(self, policy):
        self.policy = policy

    def get_action_and_value(self, x, action):
        value, log_prob, entropy = self.policy.evaluate_actions(x, action)
        return action, log_prob, entropy, value

    def parameters(self):
        return self.policy.parameters()


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    args = code.Args(update_epochs=config["epochs"], minibatch_size=config["minibatch_size"], batch_size=len(obs),
                     clip_coef=config["clip_eps"], vf_coef=config["vf_coef"], ent_coef=config["ent_coef"],
                     max_grad_norm=config["max_grad_norm"], target_kl=config["target_kl"], norm_adv=config["normalize_advantages"])
    return code.update(AgentView(policy), optimizer, obs, logp_old, actions, advantages, returns, values_old, args)

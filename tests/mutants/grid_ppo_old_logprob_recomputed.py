"""Mutant: the reference trainer, except that log pi_old is recomputed from the current policy in the
same forward pass instead of being stored at collection time (bug C7, tensorforce #312 "prob_ratio
always 1"). The ratio is exactly 1 and, as log pi_old is not detached either, its gradient is zero:
the clipped surrogate never moves the policy, and only the entropy bonus and the critic learn."""

import numpy as np
import torch

from rlspec.reference import training as ref

RLSPEC_MUTANT = {"clauses": ["GRID-TRAIN-PPO-IMPROVES"], "bug": "C7 old-logprob-recomputed-in-same-graph"}


def _update(logits, values, optimizer, rollout, cfg, rng):
    r = rollout
    adv_np, ret_np = ref.gae(r.rewards, r.values, r.next_values, r.terminated, r.truncated, cfg.gamma, cfg.lam)
    adv = torch.from_numpy(adv_np).float()
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    returns = torch.from_numpy(ret_np).float()
    obs, actions = torch.from_numpy(r.obs), torch.from_numpy(r.actions)
    for _ in range(cfg.n_epochs):
        order = torch.from_numpy(rng.permutation(len(obs)))
        for start in range(0, len(obs), cfg.minibatch_size):
            idx = order[start : start + cfg.minibatch_size]
            log_pi = torch.log_softmax(logits[obs[idx]], dim=1)
            logp = log_pi.gather(1, actions[idx, None])[:, 0]
            logp_old = log_pi.gather(1, actions[idx, None])[:, 0]  # BUG: recomputed now, not stored while acting
            entropy = -(log_pi.exp() * log_pi).sum(dim=1).mean()
            policy_loss = ref.ppo_clip_loss(logp, logp_old, adv[idx], cfg.clip_eps)
            value_loss = ((values[obs[idx]] - returns[idx]) ** 2).mean()
            loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
            loss.backward()
            torch.nn.utils.clip_grad_norm_([logits, values], cfg.max_grad_norm)
            optimizer.step()


def train_ppo(env, iterations, seed):
    cfg = ref.PPOConfig()
    rng = np.random.default_rng(seed)
    logits = torch.zeros(env.observation_space.n, env.action_space.n, requires_grad=True)
    values = torch.zeros(env.observation_space.n, requires_grad=True)
    optimizer = ref.Adam([logits, values], lr=cfg.lr)
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    state = {"obs": obs, "episode_return": 0.0, "returns": []}
    for _ in range(iterations):
        _update(logits, values, optimizer, ref.collect_rollout(env, logits, values, cfg.rollout_steps, rng, state), cfg, rng)
    return state["returns"]

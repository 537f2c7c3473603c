"""A minimal PPO trainer (Schulman et al. 2017, arXiv:1707.06347) (Algorithm 1).

    repeat `iterations` times:
        collect a fixed-length rollout with pi_old, storing log pi_old(a|s) and V_old(s) as it acts
        A, R = gae(rewards, values, next_values, terminated, truncated, gamma, lambda)      (GAE, arXiv:1506.02438)
        A    = (A - mean A) / (std A + 1e-8)                                               (per batch)
        for each epoch, for each shuffled minibatch:
            loss = ppo_clip_loss(log pi, log pi_old, A, eps) + c_v (V - R)^2 - c_e H[pi]
            one Adam step (Kingma & Ba 2015), gradients clipped to a global norm
        stop the epochs early once the k3 estimate of KL(pi_old || pi) passes its target

The policy and the critic are tables (logits (S, A) and values (S,)), so this needs only a
``gymnasium.Env`` with ``Discrete`` observation and action spaces. A time-limit truncation is not
a terminal state: it bootstraps from V(final observation) (Pardo et al. 2018,
arXiv:1712.00378). Everything random comes from ``seed``; no global RNG (numpy's or torch's) is touched.
Adam is written out (eight lines) because ``torch.optim`` imports TorchDynamo on first use, which
takes longer here (about 3 s) than the whole training run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .gae import gae
from .ppo import ppo_clip_loss


@dataclass(frozen=True)
class PPOConfig:
    rollout_steps: int = 128  # transitions collected per iteration
    gamma: float = 0.99
    lam: float = 0.95
    clip_eps: float = 0.2
    lr: float = 0.1  # Adam on tables moves faster than on a network: one entry per state
    n_epochs: int = 4
    minibatch_size: int = 64
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    max_grad_norm: float = 0.5
    target_kl: float | None = 0.05


@dataclass
class Rollout:
    """One iteration's transitions, time-major (T,), as the protocol's ``gae`` takes them."""

    obs: np.ndarray  # (T,) int
    actions: np.ndarray  # (T,) int
    logp: np.ndarray  # (T,) log pi_old(a_t|s_t), stored while acting
    rewards: np.ndarray  # (T,)
    values: np.ndarray  # (T,) V_old(s_t)
    next_values: np.ndarray  # (T,) V_old of the real next observation (the final one at an episode end)
    terminated: np.ndarray  # (T,) bool
    truncated: np.ndarray  # (T,) bool
    next_obs: np.ndarray | None = None  # (T,) int: the real next observation (the final one at an episode end)


def collect_rollout(env, logits, values, steps, rng, state) -> Rollout:
    """Act ``steps`` times with pi_old = softmax(logits); ``state`` carries the episode across calls."""
    probs = torch.softmax(logits.detach(), dim=1).double().numpy()  # (S, A) pi_old, fixed while acting
    critic = values.detach().double().numpy()  # (S,) V_old
    cdf = np.cumsum(probs, axis=1)
    buf = {k: [] for k in ("obs", "actions", "logp", "rewards", "next_obs", "terminated", "truncated")}
    obs = state["obs"]
    for _ in range(steps):
        action = min(int(np.searchsorted(cdf[obs], rng.random() * cdf[obs, -1], side="right")), probs.shape[1] - 1)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        for key, value in zip(buf, (obs, action, np.log(probs[obs, action]), reward, next_obs, terminated, truncated)):
            buf[key].append(value)
        state["episode_return"] += reward
        if terminated or truncated:
            state["returns"].append(state["episode_return"])
            state["episode_return"] = 0.0
            next_obs, _ = env.reset()
        obs = next_obs
    state["obs"] = obs
    obs_arr, next_obs = np.array(buf["obs"]), np.array(buf["next_obs"])
    return Rollout(
        obs=obs_arr,
        actions=np.array(buf["actions"]),
        logp=np.array(buf["logp"]),
        rewards=np.array(buf["rewards"], dtype=np.float64),
        values=critic[obs_arr],
        next_values=critic[next_obs],  # the final observation at an episode end, not the reset one
        terminated=np.array(buf["terminated"], dtype=bool),
        truncated=np.array(buf["truncated"], dtype=bool),
        next_obs=next_obs,
    )


class Adam:
    """Adam (Kingma & Ba, ICLR 2015) on a list of tensors, the update ``torch.optim.Adam`` makes.

    It has the parts of a ``torch.optim`` optimizer an update loop uses (``param_groups`` with its
    ``lr``, ``zero_grad``, ``step``), so a protocol ``ppo_update`` can be handed one. ``step`` also
    clears the gradients it used, so a loop that never calls ``zero_grad`` does not accumulate them.
    """

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8):
        self.params, self.betas, self.eps, self.t = list(params), betas, eps, 0
        self.param_groups = [{"params": self.params, "lr": lr}]
        self.m = [torch.zeros_like(p) for p in self.params]  # first-moment estimates
        self.v = [torch.zeros_like(p) for p in self.params]  # second-moment estimates

    @property
    def lr(self) -> float:
        return self.param_groups[0]["lr"]

    def zero_grad(self, set_to_none: bool = True):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, closure=None):
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:  # a parameter the loss does not reach: no moment update, no step
                continue
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            m_hat, v_hat = m / (1 - b1**self.t), v / (1 - b2**self.t)  # bias-corrected
            p.sub_(self.lr * m_hat / (v_hat.sqrt() + self.eps))
            p.grad = None


def update_from_rollout(logits, values, optimizer: Adam, rollout: Rollout, cfg: PPOConfig, rng) -> dict:
    """Epochs of shuffled minibatch steps on one rollout; returns diagnostics."""
    r = rollout
    adv_np, ret_np = gae(r.rewards, r.values, r.next_values, r.terminated, r.truncated, cfg.gamma, cfg.lam)
    adv = torch.from_numpy(adv_np).float()  # (T,)
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)  # per batch, unbiased std (torch's default)
    returns = torch.from_numpy(ret_np).float()  # (T,) value targets R = A + V_old
    obs, actions = torch.from_numpy(r.obs), torch.from_numpy(r.actions)
    logp_old = torch.from_numpy(r.logp).float()  # (T,) stored at collection time, never recomputed
    stats = {"approx_kl": 0.0, "epochs": 0}
    for epoch in range(cfg.n_epochs):
        order = torch.from_numpy(rng.permutation(len(obs)))  # a fresh shuffle every epoch
        for start in range(0, len(obs), cfg.minibatch_size):
            idx = order[start : start + cfg.minibatch_size]  # (B,)
            log_pi = torch.log_softmax(logits[obs[idx]], dim=1)  # (B, A) log pi(.|s)
            logp = log_pi.gather(1, actions[idx, None])[:, 0]  # (B,) log pi(a|s)
            entropy = -(log_pi.exp() * log_pi).sum(dim=1).mean()
            policy_loss = ppo_clip_loss(logp, logp_old[idx], adv[idx], cfg.clip_eps)
            value_loss = ((values[obs[idx]] - returns[idx]) ** 2).mean()
            loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
            loss.backward()
            torch.nn.utils.clip_grad_norm_([logits, values], cfg.max_grad_norm)
            optimizer.step()
            with torch.no_grad():
                log_ratio = logp - logp_old[idx]
                stats["approx_kl"] = float((torch.exp(log_ratio) - 1 - log_ratio).mean())  # k3
        stats["epochs"] = epoch + 1
        if cfg.target_kl is not None and stats["approx_kl"] > cfg.target_kl:
            break  # KL early stop: pi has moved far enough from pi_old
    return stats


def train_ppo(env, iterations, seed, cfg: PPOConfig = PPOConfig()) -> list[float]:
    """The protocol's trainer: ``iterations`` PPO iterations on ``env``; returns every finished
    episode's undiscounted return, in order."""
    rng = np.random.default_rng(seed)
    S, A = env.observation_space.n, env.action_space.n
    logits = torch.zeros(S, A, requires_grad=True)  # uniform initial policy
    values = torch.zeros(S, requires_grad=True)
    optimizer = Adam([logits, values], lr=cfg.lr)
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    state = {"obs": obs, "episode_return": 0.0, "returns": []}
    for _ in range(iterations):
        rollout = collect_rollout(env, logits, values, cfg.rollout_steps, rng, state)
        update_from_rollout(logits, values, optimizer, rollout, cfg, rng)
    return state["returns"]

"""A PPO training loop on the gridworld around the protocol's ``ppo_update``, for the studies.

The loop is the reference trainer's (``rlspec.reference.training``, Schulman et al. 2017,
arXiv:1707.06347, Algorithm 1): collect a fixed-length rollout with pi_old, compute GAE
(arXiv:1506.02438) once, hand the batch to ``ppo_update``. What differs is that the update is the
*candidate's* (or the reference's) ``ppo_update``, and that everything a study wants to see is
measured from outside it, so any protocol ``ppo_update`` can be studied:

* the policy is the reference ``LinearActorCritic`` on one-hot observations (a table: logits
  ``W[:, s]``, value ``v[s]``), in float64, starting uniform (W = 0, v = 0) as the trainer does;
* the optimizer is a :class:`RecordingAdam` that keeps the actor's parameters before each step, so
  the clip fraction and the exact KL of every step are computed from the policy itself;
* ``logp_old`` is what a collector stores: the policy's own ``evaluate_actions`` at collection time;
* returns are scored exactly: the expected undiscounted episode return of the current policy under
  the 50-step time limit, by dynamic programming (no sampling noise in the learning curves).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch

from ...reference import gridworld as gw
from ...reference.gae import gae
from ...reference.ppo import LinearActorCritic
from ...reference.training import Adam, PPOConfig, collect_rollout
from ._core import StudyError, call_op

TRAINER = PPOConfig()  # the reference trainer's settings: the studies' defaults
UPDATE_CONFIG = {  # ppo_update's config, from the trainer's
    "clip_eps": TRAINER.clip_eps, "epochs": TRAINER.n_epochs, "minibatch_size": TRAINER.minibatch_size,
    "vf_coef": TRAINER.value_coef, "ent_coef": TRAINER.entropy_coef, "max_grad_norm": TRAINER.max_grad_norm,
    "target_kl": TRAINER.target_kl, "normalize_advantages": True, "seed": 0,
}


class RecordingAdam(Adam):
    """The reference Adam, keeping a copy of the actor's weight (A, S) before every step."""

    def __init__(self, params, lr, watch: torch.Tensor):
        super().__init__(params, lr)
        self.watch = watch
        self.before_step: list[np.ndarray] = []

    def step(self, closure=None):
        self.before_step.append(self.watch.detach().double().numpy().copy())
        return super().step(closure)


@dataclass
class Batch:
    """One rollout as ppo_update receives it (torch float64), plus what the studies score it with."""

    states: np.ndarray  # (T,) int: s_t
    next_states: np.ndarray  # (T,) int: s_{t+1}, the final observation at an episode end
    obs: torch.Tensor  # (T, S) one-hot
    actions: torch.Tensor  # (T,) int64
    logp_old: torch.Tensor  # (T,) log pi_old(a_t|s_t), stored at collection time
    advantages: torch.Tensor  # (T,) GAE, not normalised
    returns: torch.Tensor  # (T,) value targets R = A + V_old
    values_old: torch.Tensor  # (T,) V_old(s_t)
    rewards: np.ndarray  # (T,)
    terminated: np.ndarray
    truncated: np.ndarray
    W_old: np.ndarray  # (A, S) the actor that collected it

    def arguments(self) -> dict:
        return {"obs": self.obs, "actions": self.actions, "logp_old": self.logp_old, "advantages": self.advantages,
                "returns": self.returns, "values_old": self.values_old}


@dataclass
class Learner:
    """Policy, optimizer and the gridworld episode carried across iterations, all from one seed."""

    policy: LinearActorCritic
    optimizer: RecordingAdam
    env: object
    rng: np.random.Generator
    state: dict
    mdp: gw.MDP = field(repr=False, default=None)

    @property
    def W(self) -> np.ndarray:
        return self.policy.actor.weight.detach().numpy().copy()


def new_learner(seed: int, lr: float = TRAINER.lr) -> Learner:
    from ..kit.gridworld_env import GridworldEnv

    env = GridworldEnv()
    S, A = env.observation_space.n, env.action_space.n
    policy = LinearActorCritic(S, A).double()
    with torch.no_grad():
        for p in policy.parameters():
            p.zero_()  # a uniform policy and a zero critic, as the reference trainer starts
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    return Learner(policy, RecordingAdam(list(policy.parameters()), lr, policy.actor.weight), env, rng,
                   {"obs": obs, "episode_return": 0.0, "returns": []}, env.mdp)


def collect(learner: Learner, steps: int = TRAINER.rollout_steps, gamma: float = TRAINER.gamma, lam: float = TRAINER.lam) -> Batch:
    p = learner.policy
    r = collect_rollout(learner.env, p.actor.weight.T, p.critic.weight[0], steps, learner.rng, learner.state)
    S = learner.env.observation_space.n
    obs = torch.eye(S, dtype=torch.float64)[torch.from_numpy(r.obs)]
    actions = torch.from_numpy(r.actions).long()
    with torch.no_grad():
        values, logp, _ = p.evaluate_actions(obs, actions)  # what a collector stores while acting
    adv, ret = gae(r.rewards, r.values, r.next_values, r.terminated, r.truncated, gamma, lam)
    return Batch(r.obs, r.next_obs, obs, actions, logp.clone(), torch.from_numpy(adv), torch.from_numpy(ret), values.clone(),
                 r.rewards, r.terminated, r.truncated, learner.W)


def run_update(ppo_update, learner: Learner, batch: Batch, config: dict, **overrides) -> dict:
    """The candidate's ppo_update on ``batch``; its diagnostics where it returns the protocol's dict, else {} (the
    protocol's diagnostics are optional: the studies measure from the recorded parameters)."""
    args = {**batch.arguments(), **overrides}
    result = call_op("ppo_update", ppo_update, policy=learner.policy, optimizer=learner.optimizer, config=dict(config), **args)
    return result if isinstance(result, dict) else {}


def as_numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64)


@lru_cache(maxsize=1)
def world_mdp() -> gw.MDP:
    return gw.tabular()


# ------------------------------------------------------------------------------------------------
# measurements from the policy's parameters


def log_policy(W: np.ndarray) -> np.ndarray:
    """(S, A) log pi(a|s) of the table with logits W[:, s] (float64, max subtracted)."""
    z = W.T - W.T.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def batch_log_ratio(W: np.ndarray, batch: Batch) -> np.ndarray:
    """(T,) log pi_W(a_t|s_t) - stored log pi_old(a_t|s_t)."""
    return log_policy(W)[batch.states, batch.actions.numpy()] - batch.logp_old.numpy()


def clip_fraction(W: np.ndarray, batch: Batch, eps: float) -> float:
    """Fraction of the batch whose ratio is outside [1 - eps, 1 + eps] under the actor W (the
    quantity CleanRL and SB3 log as clipfrac, over the whole batch instead of one minibatch)."""
    ratio = np.exp(batch_log_ratio(W, batch))
    return float(np.mean(np.abs(ratio - 1.0) > eps))


def exact_kl(W_old: np.ndarray, W_new: np.ndarray, states: np.ndarray) -> float:
    """mean over the batch's states of KL(pi_old(.|s) || pi_new(.|s)), summed over every action:
    the d of the PPO paper's adaptive-penalty rule (arXiv:1707.06347 §4), no sampling estimate."""
    lo, ln = log_policy(W_old)[states], log_policy(W_new)[states]
    return float(np.mean((np.exp(lo) * (lo - ln)).sum(axis=1)))


def episode_return(learner_or_W, time_limit: int | None = None) -> float:
    """Expected undiscounted return of the policy from the start state under the time limit (DP)."""
    W = learner_or_W.W if isinstance(learner_or_W, Learner) else learner_or_W
    return float(gw.episode_return(world_mdp(), np.exp(log_policy(W)), time_limit or gw.GRIDWORLD.time_limit))


def explained_variance(returns: np.ndarray, values: np.ndarray) -> float:
    """1 - Var[R - V] / Var[R] (the critic diagnostic of SB3 and CleanRL); nan if Var[R] = 0."""
    var = np.var(returns)
    return float("nan") if var == 0 else float(1.0 - np.var(returns - values) / var)

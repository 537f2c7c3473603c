"""Built-in adapter ``gymnasium``: Gymnasium's normalising wrappers (written against 1.4.0) through their real code.

    rlspec check --candidate gymnasium            # gymnasium is a core dependency of rlspec

Gymnasium has no PPO: what it provides of the normalisation chapter is its running statistics and the two
stateful wrappers built on them. Paths are in ``site-packages/gymnasium``.

- ``running_moments``: ``wrappers.utils.RunningMeanStd(shape=(D,))`` (``epsilon=1e-4``: the statistics start at
  count 1e-4 with mean 0 and variance 1, declared), one ``update(batch)`` per batch; its mean, var and count.
- ``merge_moments``: ``wrappers.utils.update_mean_var_count_from_moments``, Chan's pairwise update.
- ``normalize_observations``: the main column runs ``wrappers.NormalizeObservation(env)``, the single-environment
  wrapper, one per column, as a vector of wrapped sub-environments runs it (``gym.make_vec(..., wrappers=
  [NormalizeObservation])``, CleanRL's recipe): each environment keeps its own statistics (declared
  ``normalization_scope = "per-environment"``). The column's observations are a replayed environment's: the first
  is its ``reset()`` observation, the others its ``step()`` observations; ``update_running_mean`` is set to False
  from step ``train_steps`` on (evaluation). The wrapper casts its output to float32 (judged so).
- ``scale_rewards``: ``wrappers.NormalizeReward(env, gamma)`` per column, on an environment replaying the column's
  rewards and flags; after an episode end the adapter calls ``reset()``, as the vector environment's autoreset
  does. The wrapper keeps ``discounted_reward = discounted_reward * gamma * (1 - terminated) + reward`` and divides
  the reward by ``sqrt(return_rms.var + epsilon)``: neither wrapper clips (declared ``observation_clip`` and
  ``reward_clip`` None).

The variant ``vector`` runs the vector wrappers, ``wrappers.vector.NormalizeObservation`` and
``wrappers.vector.NormalizeReward``, on a ``SyncVectorEnv`` of the replayed columns: one set of statistics for all N
environments (the contract's default scope). ``NormalizeObservation`` requires the default NEXT_STEP autoreset, and
no replayed environment ends, so every step's observations are the columns' rows. ``NormalizeReward`` runs with
``autoreset_mode=SAME_STEP``, where a done sub-environment is reset inside the step that ends its episode, so the
vector's steps are the protocol's rows (in NEXT_STEP mode the wrapper skips each done environment's autoreset
step, and a row of the protocol has no such step); its accumulator is float32 (judged so).

What the reward wrappers compute: docs/bugs-found.md (both multiply the accumulated history by ``1 - terminated``
of the step being added, and the single-environment wrapper never resets at a time limit).
"""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import NormalizeObservation, NormalizeReward
from gymnasium.wrappers import vector as vector_wrappers
from gymnasium.wrappers.utils import RunningMeanStd, update_mean_var_count_from_moments

WRITTEN_AGAINST = "1.4.0"
# The releases this adapter drives (``rlspec matrix --releases`` reads it without importing Gymnasium; docs/releases.md).
RELEASES = {
    "distribution": "gymnasium",
    "range": ">=1.1.0",
    "why": "1.1.0 added gymnasium.vector.AutoresetMode, which the adapter's vector environments are built with; "
           "the 1.x wrappers and their RunningMeanStd are the code judged",
}
RLSPEC_VERSION = f"gymnasium {gym.__version__}"
RLSPEC_ARRAY = "numpy"
RLSPEC_CONVENTIONS = {
    "moments_initial_count": 1e-4,  # RunningMeanStd(epsilon=1e-4): count 1e-4, mean 0, var 1
    "observation_clip": None,  # NormalizeObservation returns (x - mean) / sqrt(var + epsilon), unclipped
    "reward_clip": None,  # NormalizeReward returns reward / sqrt(var + epsilon), unclipped
    "normalization_scope": "per-environment",  # one single-environment wrapper per sub-environment
    # normalization_eps 1e-8 under the square root and update-then-normalise: the contract's defaults
}
RLSPEC_NOTE = "Gymnasium's RunningMeanStd and its NormalizeObservation / NormalizeReward wrappers (no PPO)."


# ---------------------------------------------------------------------------------------------
# running statistics


def running_moments(x, batch_end):
    """RunningMeanStd(shape=(D,)).update(batch) per batch."""
    rms = RunningMeanStd(shape=x.shape[1:])
    start = 0
    for end in np.flatnonzero(batch_end):
        rms.update(x[start:end + 1])
        start = end + 1
    return np.asarray(rms.mean), np.asarray(rms.var), np.asarray(float(rms.count))


def merge_moments(mean_a, var_a, count_a, mean_b, var_b, count_b):
    """update_mean_var_count_from_moments(mean, var, count, batch_mean, batch_var, batch_count)."""
    mean, var, count = update_mean_var_count_from_moments(mean_a, var_a, count_a, mean_b, var_b, count_b)
    return np.asarray(mean), np.asarray(var), np.asarray(float(count))


# ---------------------------------------------------------------------------------------------
# replayed environments


class _Replay(gym.Env):
    """One column of the suite's stream as an environment: ``reset()`` returns the current row's observation (the
    first one before any step), ``step()`` moves to the next row and returns its observation, reward and flags."""

    def __init__(self, observations, rewards=None, terminated=None, truncated=None):
        self.observations = np.asarray(observations, dtype=np.float64)  # (T, D)
        T = len(self.observations)
        self.rewards = np.zeros(T) if rewards is None else np.asarray(rewards, dtype=np.float64)
        self.terminated = np.zeros(T, dtype=bool) if terminated is None else np.asarray(terminated, dtype=bool)
        self.truncated = np.zeros(T, dtype=bool) if truncated is None else np.asarray(truncated, dtype=bool)
        self.observation_space = spaces.Box(-np.inf, np.inf, self.observations.shape[1:], np.float64)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observations[min(self.t, len(self.observations) - 1)].copy(), {}

    def step(self, action):
        t, self.t = self.t, self.t + 1
        return (self.observations[min(self.t, len(self.observations) - 1)].copy(), float(self.rewards[t]),
                bool(self.terminated[t]), bool(self.truncated[t]), {})


def normalize_observations(obs, train_steps):
    """NormalizeObservation(env) per column; update_running_mean = False from step train_steps on."""
    T, N, D = obs.shape
    out = np.empty((T, N, D), dtype=np.float32)
    for j in range(N):
        env = NormalizeObservation(_Replay(obs[:, j]))
        env.update_running_mean = train_steps > 0
        out[0, j] = env.reset(seed=0)[0]
        for t in range(1, T):
            env.update_running_mean = t < train_steps
            out[t, j] = env.step(0)[0]
    return out


def scale_rewards(rewards, terminated, truncated, gamma):
    """NormalizeReward(env, gamma) per column; reset() after every episode end."""
    T, N = rewards.shape
    out = np.empty((T, N))
    for j in range(N):
        env = NormalizeReward(_Replay(np.zeros((T, 1)), rewards[:, j], terminated[:, j], truncated[:, j]), gamma=float(gamma))
        env.reset(seed=0)
        for t in range(T):
            _, reward, term, trunc, _ = env.step(0)
            out[t, j] = reward
            if term or trunc:
                env.reset()
    return out


# ---------------------------------------------------------------------------------------------
# the vector wrappers


def _vector(columns, autoreset_mode=AutoresetMode.NEXT_STEP) -> SyncVectorEnv:
    return SyncVectorEnv([(lambda column=column: column) for column in columns], autoreset_mode=autoreset_mode)


def _vector_normalize_observations(obs, train_steps):
    """wrappers.vector.NormalizeObservation on a SyncVectorEnv of the columns (NEXT_STEP; nothing ends)."""
    T, N, D = obs.shape
    env = vector_wrappers.NormalizeObservation(_vector([_Replay(obs[:, j]) for j in range(N)]))
    out = np.empty((T, N, D), dtype=np.float32)
    env.update_running_mean = train_steps > 0
    out[0] = env.reset(seed=0)[0]
    for t in range(1, T):
        env.update_running_mean = t < train_steps
        out[t] = env.step(np.zeros(N, dtype=np.int64))[0]
    return out


def _vector_scale_rewards(rewards, terminated, truncated, gamma):
    """wrappers.vector.NormalizeReward on a SyncVectorEnv of the columns with autoreset_mode SAME_STEP."""
    T, N = rewards.shape
    columns = [_Replay(np.zeros((T, 1)), rewards[:, j], terminated[:, j], truncated[:, j]) for j in range(N)]
    env = vector_wrappers.NormalizeReward(_vector(columns, AutoresetMode.SAME_STEP), gamma=float(gamma))
    env.reset(seed=0)
    out = np.empty((T, N))
    for t in range(T):
        out[t] = env.step(np.zeros(N, dtype=np.int64))[1]
    return out


vector = SimpleNamespace(
    __doc__="Gymnasium's vector wrappers (wrappers.vector.NormalizeObservation / NormalizeReward): one set of "
            "statistics shared by the environments; NormalizeReward with autoreset_mode SAME_STEP.",
    normalize_observations=_vector_normalize_observations,
    scale_rewards=_vector_scale_rewards,
    RLSPEC_PRECISION="float32",  # NormalizeReward's accumulator is float32; both outputs are float32
    RLSPEC_CONVENTIONS={**RLSPEC_CONVENTIONS, "normalization_scope": "shared"},
)
VARIANTS = ("vector",)

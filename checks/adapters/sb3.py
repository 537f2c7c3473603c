"""Built-in adapter ``sb3``: Stable-Baselines3 (written against 2.9.2) through its real code paths.

    pip install "rlspec[sb3]"
    rlspec check --candidate sb3

What each operation drives (paths in ``site-packages/stable_baselines3``):

- ``gae``: ``OnPolicyAlgorithm.collect_rollouts`` on a real ``PPO`` and a ``DummyVecEnv`` whose
  Gymnasium environments replay the suite's rollout, one environment per column. So the rollout
  goes through SB3's own episode handling: ``DummyVecEnv`` turns ``(terminated, truncated)`` into
  ``done`` plus ``TimeLimit.truncated = truncated and not terminated`` and keeps the final
  observation, ``collect_rollouts`` folds ``gamma V(final observation)`` into the reward of a
  truncated step and stores the previous ``done`` as ``episode_starts``, and
  ``RolloutBuffer.compute_returns_and_advantage`` runs the recursion with ``last_values = V(new_obs)``.
  The observation of a state is its value (a float32 1-vector) and the policy's critic reads it
  back, so the buffer sees exactly the suite's ``values`` and ``next_values``.
- ``ppo_clip_loss``, ``ppo_value_loss``, ``ppo_entropy_loss``, ``normalize_advantages``: one real
  ``PPO.train()`` (one epoch, one minibatch holding the whole batch) on a rollout buffer filled with
  the suite's ``logp_old``, ``advantages``, ``returns`` and ``old_values``. The policy's
  ``evaluate_actions`` returns the suite's ``logp_new`` / ``values`` / ``entropy`` as leaf tensors,
  so after ``loss.backward()`` inside ``train()`` their ``.grad`` is SB3's own gradient. The loss
  value is what ``train()`` logs (``train/policy_gradient_loss``, ``train/value_loss``,
  ``train/loss``). The operation returns a float32 scalar equal to that value whose gradient with
  respect to the suite's inputs is that ``.grad`` (first order: the checks differentiate once).
  ``normalize_advantages`` runs ``train()`` with ``normalize_advantage=True`` at ratio 1, where
  ``d loss / d logp_i = c A_norm_i`` with ``c = fl(-1/B)`` (the mean's backward), so
  ``A_norm = grad / c`` to one float32 rounding.
- ``train_ppo``: ``PPO("MlpPolicy", Monitor(env), **TRAIN_PPO).learn(iterations * 128)`` on the suite's
  gymnasium gridworld: SB3's own ``learn()`` end to end (rollouts, GAE, the clipped update), with a
  linear policy and critic on the one-hot observation (a table, learning rate 0.1, as the reference
  trainer uses); the episode returns are the ``Monitor``'s.
- ``diag_gaussian_log_prob`` / ``diag_gaussian_entropy`` / ``tanh_gaussian_log_prob``:
  ``DiagGaussianDistribution`` and ``SquashedDiagGaussianDistribution.log_prob(tanh(u),
  gaussian_actions=u)`` (the call SAC makes), in float32 as SB3's policies run.

Precision: the rollout buffer stores everything as float32 (``buffers.py`` ``reset()``), so GAE
and the PPO losses are computed in single precision whatever the input dtype; the adapter declares
``RLSPEC_PRECISION = "float32"`` and the suite judges it with float32 error bounds.

SB3 reads V(s_{t+1}) of a step that does not end an episode from the next stored observation
(``values[t + 1]``); the protocol's ``next_values[t]`` must then equal ``values[t + 1]`` (it does in
every real rollout and in the suite's strategies). The adapter refuses inputs where it does not,
rather than silently answering for different data.

Deliberate deviations are listed in ``sb3.xfail`` beside this file. Defects stay red; see
docs/bugs-found.md.
"""

from __future__ import annotations

import contextlib
import random
import warnings

import gymnasium as gym
import numpy as np
import stable_baselines3
import torch as th
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.distributions import DiagGaussianDistribution, SquashedDiagGaussianDistribution
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.vec_env import DummyVecEnv

WRITTEN_AGAINST = "2.9.2"
RLSPEC_VERSION = f"stable-baselines3 {stable_baselines3.__version__}"
RLSPEC_ARRAY = "numpy"  # gae takes numpy; the loss operations receive torch tensors from the suite
RLSPEC_PRECISION = "float32"  # RolloutBuffer stores float32 (see the module docstring)
RLSPEC_CONVENTIONS = {
    # PPO.train(), ppo/ppo.py:216-256
    "dual_clip": None,
    "value_loss_factor": 1.0,  # F.mse_loss(returns, values_pred): no 0.5 (vf_coef multiplies it separately)
    "advantage_std_ddof": 1,  # torch's Tensor.std()
    "advantage_eps": 1e-8,
    "advantage_eps_form": "std",  # (A - mean) / (std + 1e-8), skipped for a minibatch of one
    "advantage_normalization": "minibatch",
    "kl_stop": "minibatch",  # approx_kl (k3 of the stored samples) checked before the minibatch's step
    "kl_stop_factor": 1.5,  # stops when approx_kl > 1.5 target_kl
    # facts about the library that no clause judges (not conventions):
    # value_clip_form: "clipped prediction only" (values_pred = V_old + clamp(V - V_old): no max with the unclipped error)
    # truncation: "gamma V(terminal_observation) folded into the reward by collect_rollouts"
    # squash_jacobian: "log(1 - tanh(u)^2 + 1e-6)"
    # storage_dtype: "float32"
}


@contextlib.contextmanager
def _library_call():
    """SB3 draws from numpy's and torch's global RNGs (action sampling, minibatch order): seed both
    so a call is reproducible, and put every global RNG back afterwards."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    with th.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        th.default_generator.manual_seed(0)  # the CPU generator only (manual_seed also walks CUDA)
        np.random.seed(0)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)


def _silent_logger() -> Logger:
    """A logger with no output format: train() records into ``name_to_value`` and writes nothing."""
    return Logger(folder=None, output_formats=[])


# ---------------------------------------------------------------------------------------------
# gae through collect_rollouts


class _ReplayedColumn(gym.Env):
    """One column of the suite's rollout as a Gymnasium environment whose observation is V(state).

    ``step`` at time t returns reward r_t and the flags of step t. The observation it returns is
    the next state's: ``[values[t + 1]]`` inside an episode, ``[next_values[t]]`` (the final
    observation) when the step ends an episode or the rollout. After an episode end DummyVecEnv
    calls ``reset``, which returns the next episode's first state, ``[values[t + 1]]``.
    """

    observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, rewards, values, next_values, terminated, truncated):
        self.rewards, self.values, self.next_values = rewards, values, next_values
        self.terminated, self.truncated = terminated, truncated
        self.t = 0

    def _observe(self, value) -> np.ndarray:
        return np.array([value], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        # before step 0, or after an episode end at step t - 1: the state at t (unused past the end)
        return self._observe(self.values[self.t] if self.t < len(self.values) else 0.0), {}

    def step(self, action):
        t, self.t = self.t, self.t + 1
        ends = bool(self.terminated[t] or self.truncated[t]) or t == len(self.values) - 1
        following = self.next_values[t] if ends else self.values[t + 1]
        return self._observe(following), float(self.rewards[t]), bool(self.terminated[t]), bool(self.truncated[t]), {}


class _CriticReadsObservation(ActorCriticPolicy):
    """A controlled policy for collect_rollouts: V(obs) = obs[0] exactly, action 0, log-prob 0.

    Only the value head matters to GAE; skipping the action distribution keeps a step cheap.
    """

    def forward(self, obs, deterministic=False):
        n = obs.shape[0]
        if getattr(self, "_zeros", (None,))[0] != n:  # reused every step: a 100000-step rollout is all loop overhead
            self._zeros = (n, th.zeros(n, dtype=th.long), th.zeros(n))
        return self._zeros[1], obs[:, :1], self._zeros[2]

    def predict_values(self, obs):
        return obs[:, :1]


_COLLECTORS: dict[int, PPO] = {}


def _collector(n_envs: int) -> PPO:
    """A PPO with the controlled critic for ``n_envs`` environments, built once per process (its
    construction costs as much as a short rollout); each call gives it its own env and buffer."""
    if n_envs not in _COLLECTORS:
        placeholder = DummyVecEnv([lambda: _ReplayedColumn(*([np.zeros(1)] * 5))] * n_envs)
        model = PPO(_CriticReadsObservation, placeholder, n_steps=1, batch_size=n_envs, n_epochs=1,
                    normalize_advantage=False, device="cpu", policy_kwargs={"net_arch": []})
        model.set_logger(_silent_logger())
        _COLLECTORS[n_envs] = model
    return _COLLECTORS[n_envs]


def _require_consistent_critic(values, next_values, ends) -> None:
    inside = ~ends[:-1]
    mismatch = inside & (next_values[:-1] != values[1:])
    if mismatch.any():
        t, j = (int(i) for i in np.argwhere(mismatch)[0])
        raise ValueError(
            f"next_values[{t}] = {next_values[t, j]!r} but values[{t + 1}] = {values[t + 1, j]!r} in column {j} "
            "inside an episode: SB3 reads V(s_{t+1}) from the next stored observation, so these must be equal"
        )


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """collect_rollouts + RolloutBuffer.compute_returns_and_advantage; float32 (T,) or (T, N) outputs."""
    one_column = np.ndim(rewards) == 1
    columns = lambda a: np.asarray(a).reshape(len(a), -1)
    r, v, nv = columns(rewards), columns(values), columns(next_values)
    term, trunc = columns(terminated).astype(bool), columns(truncated).astype(bool)
    _require_consistent_critic(v, nv, term | trunc)
    T, N = r.shape
    with _library_call():
        env = DummyVecEnv([
            (lambda j=j: _ReplayedColumn(r[:, j], v[:, j], nv[:, j], term[:, j], trunc[:, j])) for j in range(N)
        ])
        model = _collector(N)
        model.set_env(env, force_reset=True)
        model.n_steps, model.gamma, model.gae_lambda = T, float(gamma), float(lam)
        # a fresh buffer for this rollout, built as OnPolicyAlgorithm._setup_model builds it
        model.rollout_buffer = model.rollout_buffer_class(
            T, model.observation_space, model.action_space, device=model.device, gamma=model.gamma,
            gae_lambda=model.gae_lambda, n_envs=N, **model.rollout_buffer_kwargs,
        )
        _, callback = model._setup_learn(total_timesteps=T * N)  # resets the envs and counters, as learn() does
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=T)
    buffer = model.rollout_buffer
    advantages, returns = buffer.advantages.copy(), buffer.returns.copy()
    if one_column:
        return advantages[:, 0], returns[:, 0]
    return advantages, returns


# ---------------------------------------------------------------------------------------------
# the PPO losses through PPO.train()


class _SampleIndex(gym.Env):
    """Spaces for the train() runs: the observation of sample i is [i]. Never stepped."""

    observation_space = spaces.Box(0.0, np.inf, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):  # pragma: no cover - the buffer is filled directly
        raise RuntimeError("not stepped")


class _GivenOutputs(ActorCriticPolicy):
    """A controlled policy for train(): ``evaluate_actions`` returns the suite's tensors, row i for
    the sample whose observation is [i], whatever order the minibatch comes in."""

    given: dict

    def evaluate_actions(self, obs, actions):
        rows = obs[:, 0].long()
        return self.given["values"][rows], self.given["log_prob"][rows], self.given["entropy"][rows]


def _leaf(x, n) -> th.Tensor:
    """A float32 leaf holding ``x`` (or zeros), which train() will back-propagate into."""
    data = th.zeros(n) if x is None else th.as_tensor(x).detach().reshape(n).to(th.float32).clone()
    return data.requires_grad_(True)


def _train(*, logp_new, logp_old, advantages=None, values=None, returns=None, old_values=None, entropy=None,
           clip_range=0.2, clip_range_vf=None, normalize_advantage=False, ent_coef=0.0, vf_coef=0.0):
    """One real PPO.train() on a buffer holding the given batch; returns (logged values, leaves)."""
    n = int(np.size(np.asarray(th.as_tensor(logp_old).detach())))
    with _library_call():
        model = PPO(
            _GivenOutputs, DummyVecEnv([_SampleIndex]), n_steps=n, batch_size=n, n_epochs=1,
            clip_range=float(clip_range), clip_range_vf=None if clip_range_vf is None else float(clip_range_vf),
            normalize_advantage=False, ent_coef=float(ent_coef), vf_coef=float(vf_coef), device="cpu",
            policy_kwargs={"net_arch": []},
        )
        # The constructor refuses normalize_advantage with a one-sample buffer; train() itself skips
        # the normalisation of a one-sample minibatch (ppo.py:218), which is what this exercises.
        model.normalize_advantage = normalize_advantage
        model.set_logger(_silent_logger())
        as_numpy = lambda x: np.zeros(n) if x is None else np.asarray(th.as_tensor(x).detach().double()).reshape(n)
        old_v, old_logp = as_numpy(old_values), as_numpy(logp_old)
        buffer = model.rollout_buffer
        for i in range(n):
            buffer.add(np.array([[i]], dtype=np.float32), np.zeros((1, 1)), np.zeros(1), np.zeros(1),
                       th.tensor([old_v[i]]), th.tensor([old_logp[i]]))
        buffer.advantages[:, 0] = as_numpy(advantages)
        buffer.returns[:, 0] = as_numpy(returns)
        leaves = {"log_prob": _leaf(logp_new, n), "values": _leaf(values, n), "entropy": _leaf(entropy, n)}
        model.policy.given = leaves
        model.train()
    return dict(model.logger.name_to_value), leaves


def _expose(value: float, *pairs) -> th.Tensor:
    """A float32 scalar equal to the loss train() logged whose gradient with respect to each suite
    input ``x`` is the gradient train() left on the matching leaf (first order, exact values)."""
    out = th.tensor(float(value), dtype=th.float32)
    for x, leaf in pairs:
        if isinstance(x, th.Tensor) and x.requires_grad:
            grad = leaf.grad if leaf.grad is not None else th.zeros_like(leaf)
            out = out + ((x - x.detach()) * grad.reshape(x.shape).to(x.dtype)).sum().to(th.float32)
    return out


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    logged, leaves = _train(logp_new=logp_new, logp_old=logp_old, advantages=advantages, clip_range=clip_eps)
    return _expose(logged["train/policy_gradient_loss"], (logp_new, leaves["log_prob"]))


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    clipped = old_values is not None and clip_eps is not None
    zeros = th.zeros(len(values))
    logged, leaves = _train(logp_new=zeros, logp_old=zeros, values=values, returns=returns,
                            old_values=old_values if clipped else None, clip_range_vf=clip_eps if clipped else None,
                            vf_coef=1.0)
    return _expose(logged["train/value_loss"], (values, leaves["values"]))


def ppo_entropy_loss(entropy, coef):
    """train()'s total loss with zero advantages and vf_coef 0: ent_coef * (-mean(entropy))."""
    zeros = th.zeros(len(entropy))
    logged, leaves = _train(logp_new=zeros, logp_old=zeros, entropy=entropy, ent_coef=coef)
    return _expose(logged["train/loss"], (entropy, leaves["entropy"]))


def normalize_advantages(advantages):
    """The advantages train() uses, read from d loss / d logp at ratio 1 (see the module docstring)."""
    n = len(advantages)
    zeros = th.zeros(n)
    _, leaves = _train(logp_new=zeros, logp_old=zeros, advantages=advantages, normalize_advantage=True)
    probe = th.zeros(n, requires_grad=True)
    (-probe.mean()).backward()  # the same backward as train()'s -mean(...): fl(-1/B) per element
    return (leaves["log_prob"].grad.double() / probe.grad.double()).to(th.float32)


# ---------------------------------------------------------------------------------------------
# end to end

TRAIN_PPO = {  # SB3's PPO with a linear policy and critic on the one-hot observation: a table, as in the reference
    "n_steps": 128, "batch_size": 64, "n_epochs": 4, "learning_rate": 0.1, "ent_coef": 0.01,
    "policy_kwargs": {"net_arch": []},
}


def train_ppo(env, iterations, seed):
    """``PPO("MlpPolicy", Monitor(env)).learn(iterations * n_steps)``: SB3's own rollouts, GAE and
    updates on the suite's gymnasium env; the episode returns are what ``Monitor`` recorded."""
    monitored = Monitor(env)
    with _library_call():
        model = PPO("MlpPolicy", monitored, seed=int(seed), device="cpu", **TRAIN_PPO)
        model.set_logger(_silent_logger())
        model.learn(total_timesteps=int(iterations) * TRAIN_PPO["n_steps"])
    return np.asarray(monitored.get_episode_rewards(), dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# Gaussian policies


def _float32(*tensors):
    """SB3's policies run in torch's default float32; so do these distribution calls."""
    return [th.as_tensor(x).to(th.float32) for x in tensors]


def diag_gaussian_log_prob(mean, log_std, action):
    mean, log_std, action = _float32(mean, log_std, action)
    distribution = DiagGaussianDistribution(mean.shape[-1]).proba_distribution(mean, log_std)
    return distribution.log_prob(action)


def diag_gaussian_entropy(log_std):
    (log_std,) = _float32(log_std)
    distribution = DiagGaussianDistribution(log_std.shape[-1]).proba_distribution(th.zeros_like(log_std), log_std)
    return distribution.entropy()


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    mean, log_std, pre_tanh = _float32(mean, log_std, pre_tanh)
    distribution = SquashedDiagGaussianDistribution(mean.shape[-1]).proba_distribution(mean, log_std)
    return distribution.log_prob(th.tanh(pre_tanh), gaussian_actions=pre_tanh)

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

Off-policy (DDPG, TD3, SAC). SB3 has no function for a target or an actor loss: each is one real ``train(gradient_steps=1)``
of ``DDPG`` / ``TD3`` / ``SAC`` (their defaults, ``net_arch=[]``, CPU) on a replay buffer holding the suite's batch;
the two schedules are a sequence of real ``train(gradient_steps=k)`` calls; ``polyak_update`` is SB3's function.

- The batch goes in as collect_rollouts stores a step (``_off_policy``): for row i the adapter sets ``_last_obs`` to
  its observation, a one-environment ``DummyVecEnv`` steps (returning row i's next observation, reward, terminated
  and truncated: DummyVecEnv makes ``done = terminated or truncated``, ``TimeLimit.truncated = truncated and not
  terminated`` and keeps the final observation) and ``OffPolicyAlgorithm._store_transition`` adds it to SB3's
  ``ReplayBuffer`` (``handle_timeout_termination=True``, the default), with the action normalised by
  ``policy.scale_action`` as SB3 stores it. The buffer is SB3's ``ReplayBuffer`` with ``sample()`` returning every row
  in order (its own ``_get_samples``, where ``dones * (1 - timeouts)`` is formed), so a step sees the whole batch.
- The suite's networks are loaded into SB3's policy as float32 copies (SB3's networks are float32; the suite's own
  modules are never touched): an actor becomes ``Actor.mu`` of DDPG/TD3's Actor, which applies it to the flattened
  observation; SAC's policy ``obs -> (mean, log_std)`` becomes ``Actor.mu`` and ``Actor.log_std`` of SAC's Actor
  (``net_arch=[]``), which clamps log_std to [-20, 2] and samples ``SquashedDiagGaussianDistribution``; a critic
  becomes a q-network of SB3's ``ContinuousCritic`` (called on ``cat([features, actions])``, split back). The
  optimizers are rebuilt over them as the policy builds them.
- Randomness is an input: while train() runs, a ``TorchFunctionMode`` (``_Controlled``) hands SB3's
  ``Tensor.normal_`` draws the suite's noise, in the order train() draws them, and records the targets train() passes
  to the critic loss's ``F.mse_loss``. SB3's code is not changed.

Operation by operation:

- ``td_target``: DDPG.train()'s ``target_q_values = rewards + (1 - dones) * gamma * next_q_values``: row i's next
  observation is [i] and the target critic's q-network returns ``next_q[i]`` for it (``_Lookup``); read from the
  critic loss's ``F.mse_loss``. float32, (B,).
- ``ddpg_critic_target``: DDPG.train()'s target with the four networks loaded (DDPG is TD3 with ``policy_delay=1``,
  ``target_noise_clip=0`` and one critic: its noise draw is clipped to 0).
- ``td3_critic_target``: TD3.train()'s target. SB3 acts in a normalised action space: the actor's output is in
  [-1, 1], TD3 clamps the smoothed target action to [-1, 1], and ``unscale_action`` maps it to [low, high] for the
  environment. The adapter expresses the protocol's problem in those units: the action space is Box(low, high); the
  target actor is the suite's followed by SB3's ``scale_action``; the critics read ``unscale_action`` of SB3's action;
  the smoothing noise (the one ``normal_(0, target_policy_noise)`` draw) and ``target_noise_clip`` are the suite's
  divided by ``scale_action``'s slope (high - low) / 2, per dimension (``target_noise_clip`` a (D,) float32 tensor,
  which ``Tensor.clamp`` takes). The changes of units are made in float64 and rounded once.
- ``sac_critic_target``: SAC.train()'s target with ``ent_coef=alpha`` (a fixed coefficient: the protocol gives alpha);
  train() draws the sample at ``obs`` first (given zeros) and the one at ``next_obs`` second (given the noise).
- ``dpg_actor_loss``: DDPG.train()'s actor loss ``-critic.q1_forward(obs, actor(obs)).mean()``, logged as
  ``train/actor_loss``, exposed as a float32 scalar whose gradient with respect to each of the suite's actor parameters
  is the ``.grad`` train() left on the float32 copy (first order, as the PPO losses). ``learning_rate=0``: train() steps
  the critic before the actor loss, and the loss must see the critic as given. The batch is ``obs`` with zero
  actions and rewards. The critic's own gradient from the actor loss (SB3 reaches it, declared ``discarded``) is not
  exposed.
- ``sac_actor_loss``: SAC.train()'s actor loss ``(ent_coef * log_prob - min_qf_pi).mean()`` with ``ent_coef=alpha``
  and ``learning_rate=0``, its gradient on the policy's parameters read back the same way; the noise is the first draw.
- ``sac_alpha_loss``: SAC.train()'s ``ent_coef_loss = -(log_ent_coef * (log_prob + target_entropy).detach()).mean()``
  with ``ent_coef="auto"`` (the default) and ``target_entropy="auto"`` (the default, ``-prod(action_space.shape)``)
  when None is given, else that value; ``log_ent_coef`` holds log_alpha and the actor's ``action_log_prob`` returns
  the given log_prob (a float32 leaf, row i for observation [i]). The value is the logged ``train/ent_coef_loss``; the
  gradients on log_alpha and log_prob are read in a step pre-hook of ``ent_coef_optimizer``, just after
  ``ent_coef_loss.backward()`` (the actor loss later back-propagates into log_prob too).
- ``polyak_update``: ``stable_baselines3.common.utils.polyak_update([online], [target], tau)`` on float32 tensors.
- ``target_network_updates``: SAC.train(gradient_steps=k) for each k, with ``tau`` and ``target_update_interval=period``,
  one critic whose q-network's parameters are the protocol's vector (``_Vector``); its optimizer is scripted
  (``_Scripted``): step n sets the online parameters to ``online[n - 1]``. Every other part of train() runs as is;
  the target is read before each critic step and at the end. The variant ``td3_target_updates`` does the same
  through TD3.train() with ``policy_delay=period``.
- ``td3_actor_update_steps``: TD3.train(gradient_steps=k) for each k with ``policy_delay`` and TD3's other defaults, on
  four fixed random transitions: a step pre-hook on the actor's optimizer marks the critic steps with an actor update,
  and the target networks are compared before and after each critic step (1 when critic_target and actor_target
  both moved, 0.5 when one did).

SAC tests ``gradient_step % target_update_interval == 0`` with ``gradient_step`` restarting at 0 in every train() call
(sac.py:293): within one call it updates on steps 1, period + 1, ... of the call, and with one gradient step per call
(train_freq=1, gradient_steps=1, SB3's defaults) on every step whatever the period. TARGET-UPDATE-PERIOD and
TARGET-HARD-UPDATE fail on it (docs/bugs-found.md 17, bug H6); ``update_phase = "end"`` is TD3's (and the variant
``td3_target_updates`` passes them). The variant ``timeouts_as_terminal`` is the replay buffer with
``handle_timeout_termination=False`` (td_target only).

Precision: the rollout buffer stores everything as float32 (``buffers.py`` ``reset()``), so GAE
and the PPO losses are computed in single precision whatever the input dtype; so are the replay buffer and the
off-policy networks. The adapter declares ``RLSPEC_PRECISION = "float32"`` and the suite judges it with float32
error bounds.

SB3 reads V(s_{t+1}) of a step that does not end an episode from the next stored observation
(``values[t + 1]``); the protocol's ``next_values[t]`` must then equal ``values[t + 1]`` (it does in
every real rollout and in the suite's strategies). The adapter refuses inputs where it does not,
rather than silently answering for different data.

Deliberate deviations are listed in ``sb3.xfail`` beside this file. Defects stay red; see
docs/bugs-found.md.
"""

from __future__ import annotations

import contextlib
import copy
import random
import warnings
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import stable_baselines3
import torch as th
from gymnasium import spaces
from stable_baselines3 import DDPG, PPO, SAC, TD3
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.distributions import DiagGaussianDistribution, SquashedDiagGaussianDistribution
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import FlattenExtractor
from stable_baselines3.common.utils import polyak_update as sb3_polyak_update
from stable_baselines3.common.vec_env import DummyVecEnv
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

WRITTEN_AGAINST = "2.9.2"
# The releases this adapter drives (``rlspec matrix --releases`` reads it without importing SB3; docs/releases.md).
RELEASES = {
    "distribution": "stable-baselines3",
    "range": ">=2.0.0",
    "why": "2.0.0 is SB3's first release on Gymnasium (terminated / truncated, the final observation), "
           "which the gae path replays; 1.x is on gym",
}
RLSPEC_VERSION = f"stable-baselines3 {stable_baselines3.__version__}"
RLSPEC_ARRAY = "numpy"  # gae, td_target and the target schedules take numpy; the loss and network operations receive torch
RLSPEC_PRECISION = "float32"  # RolloutBuffer, ReplayBuffer and the networks are float32 (see the module docstring)
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
    "kl_stop_statistic": "last-minibatch",  # each minibatch's own approx_kl, tested before its step; break ends the epochs too
    "value_clipping": "none",  # clip_range_vf=None by default (the variant clip_range_vf maps value_clip_eps onto it)
    "minibatch_remainder": "kept",  # RolloutBuffer.get(batch_size): the last minibatch holds the remainder
    "ppo_collected_families": ["categorical", "gaussian"],  # PPO squashes (tanh) only with gSDE: squash_output requires use_sde
    # SAC / TD3 / DDPG (sac/sac.py, td3/td3.py, common/utils.py)
    "target_update_kinds": ["polyak", "hard"],  # polyak_update(params, target_params, tau); tau = 1 copies (DQN's default)
    "update_phase": "end",  # TD3: self._n_updates += 1, then `% policy_delay == 0`, a counter kept across train() calls
    "actor_loss_critic_gradient": "discarded",  # the actor losses call the live critics; critic.optimizer.zero_grad() first
    "tanh_log_prob_eps": 1e-6,  # SquashedDiagGaussianDistribution: log(1 - tanh(u)^2 + 1e-6)
    "alpha_loss_parameter": "log_alpha",  # -(log_ent_coef * (log_prob + target_entropy).detach()).mean()
    "default_target_entropy_per_dim": -1.0,  # target_entropy="auto": -prod(action_space.shape)
    # facts about the library that no clause judges (not conventions):
    # value_clip_form: "clipped prediction only" (values_pred = V_old + clamp(V - V_old): no max with the unclipped error)
    # truncation: "gamma V(terminal_observation) folded into the reward by collect_rollouts"
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
        buffer_class, buffer_kwargs = _rollout_buffer_class(model)
        model.rollout_buffer = buffer_class(
            T, model.observation_space, model.action_space, device=model.device, gamma=model.gamma,
            gae_lambda=model.gae_lambda, n_envs=N, **buffer_kwargs,
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
# a whole PPO update: PPO.train() with the suite's policy module and optimizer


class _Spaces(gym.Env):
    """Spaces for a PPO built around the suite's batch: one-hot observations of ``n`` states (float32, as SB3's
    Box observations are stored), and the suite's actions (Discrete(K) or Box of D dimensions). Never stepped."""

    def __init__(self, observation_space, action_space):
        self.observation_space, self.action_space = observation_space, action_space

    def reset(self, *, seed=None, options=None):
        return np.zeros(self.observation_space.shape, dtype=np.float32), {}

    def step(self, action):  # pragma: no cover - the buffer is filled directly
        raise RuntimeError("not stepped")


def _spaces_of(obs, actions) -> _Spaces:
    n = obs.shape[-1]
    observation_space = spaces.Box(0.0, 1.0, (n,), np.float32)
    if actions.is_floating_point():
        # SB3 needs finite bounds; they only clip what an environment would receive, never the stored actions
        bound = float(actions.detach().abs().max()) + 1.0 if actions.numel() else 1.0
        action_space = spaces.Box(-bound, bound, tuple(actions.shape[1:]), np.float32)
    else:
        action_space = spaces.Discrete(int(actions.max()) + 1 if actions.numel() else 1)
    return _Spaces(observation_space, action_space)


class _SuitePolicy:
    """What ``PPO.train()`` uses of ``model.policy`` (ppo.py:184-300), answered by the suite's objects: its
    ``evaluate_actions`` is the suite module's (observations and Gaussian actions, float32 in SB3's buffer, cast
    to the module's dtype; one-hot rows survive the cast exactly), ``optimizer`` is the suite's optimizer and
    ``parameters()`` the module's, which train() clips with ``clip_grad_norm_``; ``set_training_mode`` is the
    module's ``train(mode)``, as ``BasePolicy.set_training_mode`` is."""

    def __init__(self, module, optimizer):
        self.module, self.optimizer = module, optimizer
        self.dtype = next(module.parameters()).dtype

    def set_training_mode(self, mode: bool) -> None:
        self.module.train(mode)

    def evaluate_actions(self, obs, actions):
        actions = actions.to(self.dtype) if actions.is_floating_point() else actions
        return self.module.evaluate_actions(obs.to(self.dtype), actions)

    def parameters(self):
        return self.module.parameters()


@contextlib.contextmanager
def _seeded(seed: int):
    """train()'s minibatch order comes from numpy's global generator (``np.random.permutation`` in
    ``RolloutBuffer.get``): seed it from the suite's seed for the call, and put every global RNG back."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    with th.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        th.default_generator.manual_seed(int(seed))
        np.random.seed(int(seed) % 2**32)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)


def _ppo_on_batch(obs, actions, logp_old, advantages, returns, values_old, **kwargs) -> PPO:
    """A real PPO (its defaults but for ``kwargs``) whose rollout buffer holds the suite's batch as one
    environment's B steps, filled by ``RolloutBuffer.add`` (float32, as collect_rollouts stores it), with the
    advantages and returns written into their fields (not produced by SB3's GAE: they are the update's input)."""
    B = len(obs)
    model = PPO("MlpPolicy", DummyVecEnv([lambda: _spaces_of(obs, actions)]), n_steps=B, device="cpu",
                policy_kwargs={"net_arch": []}, **kwargs)
    model.set_logger(_silent_logger())
    buffer = model.rollout_buffer
    as_numpy = lambda x: x.detach().cpu().double().numpy()
    obs_np, actions_np = as_numpy(obs), actions.detach().cpu().numpy()
    for i in range(B):
        buffer.add(obs_np[i : i + 1], actions_np[i : i + 1], np.zeros(1), np.zeros(1),
                   values_old[i : i + 1].detach().cpu(), logp_old[i : i + 1].detach().cpu())
    buffer.advantages[:, 0] = as_numpy(advantages)
    buffer.returns[:, 0] = as_numpy(returns)
    return model


def _ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config, *, clip_range_vf=None):
    model = _ppo_on_batch(
        obs, actions, logp_old, advantages, returns, values_old,
        # train() writes its learning rate into the optimizer's param_groups (_update_learning_rate): the suite's own
        learning_rate=float(optimizer.param_groups[0]["lr"]),
        n_epochs=int(config["epochs"]), batch_size=int(config["minibatch_size"]), clip_range=float(config["clip_eps"]),
        clip_range_vf=clip_range_vf, ent_coef=float(config["ent_coef"]), vf_coef=float(config["vf_coef"]),
        max_grad_norm=float(config["max_grad_norm"]),
        target_kl=None if config["target_kl"] is None else float(config["target_kl"]),
        normalize_advantage=bool(config["normalize_advantages"]),
    )
    model.policy = _SuitePolicy(policy, optimizer)
    with _seeded(config["seed"]):
        model.train()
    return None  # SB3 returns nothing; its logs are in model.logger


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    """One real ``PPO.train()`` at SB3's defaults (``clip_range_vf=None``: no value clipping, whatever
    ``value_clip_eps`` says) with the config's hyperparameters at their SB3 names, on the suite's batch, stepping
    the suite's optimizer through the suite's module (see ``_SuitePolicy``)."""
    return _ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config)


def _ppo_update_clip_range_vf(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    """``PPO.train()`` with ``clip_range_vf = value_clip_eps`` (SB3's value clipping, off by default)."""
    eps = config.get("value_clip_eps")
    return _ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config,
                       clip_range_vf=None if eps is None else float(eps))


# ---------------------------------------------------------------------------------------------
# PPO's first ratios on SB3's own collected batch: collect_rollouts stores log pi_old, train() re-scores


class _State(gym.Env):
    """One state of the described batch: its observation is the state's one-hot row, every step ends the episode."""

    def __init__(self, i: int, n: int, action_space):
        self.observation = np.eye(n, dtype=np.float32)[i]
        self.observation_space, self.action_space = spaces.Box(0.0, 1.0, (n,), np.float32), action_space

    def reset(self, *, seed=None, options=None):
        return self.observation.copy(), {}

    def step(self, action):
        return self.observation.copy(), 0.0, True, False, {}


class _InDtype(FlattenExtractor):
    """SB3's ``FlattenExtractor`` with the observations (float32 after ``preprocess_obs``) cast to the policy's dtype."""

    def __init__(self, observation_space, dtype=th.float32):
        super().__init__(observation_space)
        self.dtype = dtype

    def forward(self, observations):
        return super().forward(observations).to(self.dtype)


class _DescribedPolicy(ActorCriticPolicy):
    """SB3's ``ActorCriticPolicy`` (``net_arch=[]``: the features are the one-hot observation) whose action head
    gives each state the described parameters: ``action_net`` holds the logits or means as its weights, and for a
    Gaussian a second linear head the per-state log-std, passed to SB3's ``DiagGaussianDistribution`` (its
    ``proba_distribution(mean, log_std)`` broadcasts a (B, K) log-std). The policy computes in the dtype of ``loc``
    (SB3 casts observations to float32 in ``preprocess_obs``; ``_InDtype`` casts the one-hot features back, exactly).
    The first ``evaluate_actions`` of ``train()`` is recorded."""

    def __init__(self, *args, described: dict, **kwargs):
        self.described = described  # read by _build, which the base __init__ calls
        super().__init__(*args, **kwargs)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        loc, scale = self.described["loc"], self.described["scale"]
        with th.no_grad():
            self.action_net.weight.copy_(loc.T)
            self.action_net.bias.zero_()
        if scale is not None:
            self.log_std_net = nn.Linear(loc.shape[0], loc.shape[1], bias=False)
            with th.no_grad():
                self.log_std_net.weight.copy_(scale.log().T)
        self.first = None

    def _get_action_dist_from_latent(self, latent_pi):
        if isinstance(self.action_dist, DiagGaussianDistribution):
            return self.action_dist.proba_distribution(self.action_net(latent_pi), self.log_std_net(latent_pi))
        return super()._get_action_dist_from_latent(latent_pi)

    def evaluate_actions(self, obs, actions):
        values, log_prob, entropy = super().evaluate_actions(obs, actions)
        if self.first is None:
            self.first = log_prob.detach().clone()
        return values, log_prob, entropy


def ppo_collected_ratios(family, loc, scale, seed):
    """``PPO.learn()`` for one rollout step of B environments, environment i in state i: ``collect_rollouts`` acts
    with ``policy(obs)`` (SB3's ``forward``: the action sampled by the distribution and its ``log_prob``, stored in
    the ``RolloutBuffer``, float32), then ``train()`` re-scores the stored actions with ``evaluate_actions``; the
    ratios are ``exp(log_prob - rollout_data.old_log_prob)`` (ppo.py:222) of its first minibatch, the whole batch
    (``batch_size = B``), before its step. ``PPO(seed=seed)`` seeds SB3's sampling (``set_random_seed``)."""
    if family == "tanh_gaussian":
        raise ValueError("SB3's PPO squashes actions only with gSDE (squash_output requires use_sde): declared "
                         "ppo_collected_families")
    B, K = loc.shape
    action_space = spaces.Discrete(K) if family == "categorical" else spaces.Box(-1.0, 1.0, (K,), np.float32)
    env = DummyVecEnv([(lambda i=i: _State(i, B, action_space)) for i in range(B)])
    samples = []
    with _seeded(seed):
        described = {"loc": loc.detach(), "scale": None if scale is None else scale.detach()}
        model = PPO(_DescribedPolicy, env, n_steps=1, batch_size=B, n_epochs=1, normalize_advantage=B > 1, seed=int(seed),
                    device="cpu", policy_kwargs={"net_arch": [], "described": described, "features_extractor_class": _InDtype,
                                                 "features_extractor_kwargs": {"dtype": loc.dtype}})
        model.policy.to(loc.dtype)
        model.set_logger(_silent_logger())
        buffer, get = model.rollout_buffer, model.rollout_buffer.get

        def recorded(batch_size=None):  # the minibatches train() reads, as it reads them
            for data in get(batch_size):
                samples.append(data)
                yield data

        buffer.get = recorded
        model.learn(total_timesteps=B)
    first = samples[0]
    rows = first.observations.argmax(-1)
    ratios = th.empty(B, dtype=model.policy.first.dtype)
    ratios[rows] = th.exp(model.policy.first - first.old_log_prob)  # ppo.py:222
    return ratios


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


# ---------------------------------------------------------------------------------------------
# off-policy: DDPG, TD3 and SAC through their train()


class _Transitions(gym.Env):
    """The replay batch as a Gymnasium environment: its i-th step returns row i's next observation, reward and flags
    (through DummyVecEnv, which turns them into ``done`` and ``TimeLimit.truncated`` and keeps the final observation)."""

    def __init__(self, obs_dim, low, high, next_obs, rewards, terminated, truncated):
        self.observation_space = spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = spaces.Box(np.asarray(low, np.float32), np.asarray(high, np.float32), dtype=np.float32)
        self.rows, self.i = (next_obs, rewards, terminated, truncated), 0

    def reset(self, *, seed=None, options=None):
        return np.zeros(self.observation_space.shape, np.float32), {}

    def step(self, action):
        next_obs, rewards, terminated, truncated = self.rows
        i, self.i = self.i, self.i + 1
        return np.asarray(next_obs[i], np.float32), float(rewards[i]), bool(terminated[i]), bool(truncated[i]), {}


class _InOrder(ReplayBuffer):
    """SB3's ReplayBuffer whose minibatch is the whole buffer in order: ``_get_samples`` (where the timeouts are
    applied, ``dones * (1 - timeouts)``) on every row, so each train() step sees the protocol's batch."""

    def sample(self, batch_size, env=None):
        return self._get_samples(np.arange(self.size()), env=env)


def _numpy(x, dtype=np.float64) -> np.ndarray:
    return np.asarray(x.detach().cpu().numpy() if isinstance(x, th.Tensor) else x, dtype=dtype)


def _off_policy(algorithm, obs, actions, rewards, next_obs, terminated, truncated, *, low=None, high=None, **kwargs):
    """An SB3 ``algorithm`` (DDPG, TD3 or SAC with its defaults and ``kwargs``, net_arch [], CPU) whose replay buffer holds
    the batch, each row stored as collect_rollouts stores a step: ``_last_obs`` is the row's observation, the
    environment steps (DummyVecEnv: done = terminated or truncated, ``TimeLimit.truncated = truncated and not
    terminated``, the final observation kept in ``terminal_observation``) and ``_store_transition`` adds it.
    ``actions`` are in the action space's units [low, high] (default [-1, 1]); the buffer holds them normalised,
    ``policy.scale_action(actions)``, as SB3 stores them."""
    obs, actions, next_obs = _numpy(obs), _numpy(actions), _numpy(next_obs)
    rewards, terminated, truncated = _numpy(rewards), _numpy(terminated, bool), _numpy(truncated, bool)
    (B, O), D = obs.shape, actions.shape[1]
    low = -np.ones(D) if low is None else _numpy(low)
    high = np.ones(D) if high is None else _numpy(high)
    env = DummyVecEnv([lambda: _Transitions(O, low, high, next_obs, rewards, terminated, truncated)])
    policy_kwargs = {"net_arch": [], **kwargs.pop("policy_kwargs", {})}
    model = algorithm("MlpPolicy", env, buffer_size=B, learning_starts=0, replay_buffer_class=_InOrder, device="cpu",
                      policy_kwargs=policy_kwargs, **kwargs)
    model.set_logger(_silent_logger())
    for i in range(B):
        model._last_obs = obs[i:i + 1].astype(np.float32)
        buffer_action = model.policy.scale_action(actions[i:i + 1]).astype(np.float32)
        new_obs, reward, dones, infos = env.step(model.policy.unscale_action(buffer_action))
        model._store_transition(model.replay_buffer, buffer_action, new_obs, reward, dones, infos)
    return model


class _Controlled(TorchFunctionMode):
    """Active around train(): SB3's random draws (``Tensor.normal_``: TD3's target smoothing noise, the standard normal
    draws of SAC's reparameterised sample) take the suite's noise, in the order train() makes them (``draws``; None:
    SB3 draws from the seeded global RNG), and the targets train() passes to the critic loss's ``F.mse_loss`` are
    recorded (``targets``). Nothing else is touched."""

    def __init__(self, draws=None):
        super().__init__()
        self.draws = None if draws is None else [th.as_tensor(d) for d in draws]
        self.targets = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is th.Tensor.normal_ and self.draws is not None:
            out = args[0]
            if not self.draws:
                raise RuntimeError("SB3's train() drew more noise than the adapter expected")
            draw = self.draws.pop(0)
            if tuple(out.shape) != tuple(draw.shape):
                raise RuntimeError(f"SB3's train() drew noise of shape {tuple(out.shape)}, the adapter has {tuple(draw.shape)}")
            with th.no_grad():
                out.copy_(draw)
            return out
        if func is F.mse_loss:
            self.targets.append((args[1] if len(args) > 1 else kwargs["target"]).detach().clone())
        return func(*args, **kwargs)

    def __exit__(self, *exc):
        super().__exit__(*exc)
        if exc[0] is None and self.draws:
            raise RuntimeError(f"SB3's train() left {len(self.draws)} of the adapter's noise draws unused")


def _f32(module: nn.Module) -> nn.Module:
    """A float32 copy of one of the suite's networks (SB3's networks are float32); the suite's own is not touched."""
    return copy.deepcopy(module).to(th.float32)


class _QNetwork(nn.Module):
    """The suite's critic ``Q(obs, action)`` as a q-network of SB3's ContinuousCritic, which calls its q-networks on
    ``cat([features, actions])``; ``to_action`` maps SB3's normalised action back to the critic's units."""

    def __init__(self, critic, obs_dim, to_action=None):
        super().__init__()
        self.critic, self.obs_dim, self.to_action = critic, obs_dim, to_action

    def forward(self, x):
        obs, action = x[:, :self.obs_dim], x[:, self.obs_dim:]
        if self.to_action is not None:
            action = self.to_action(action)
        return self.critic(obs, action).reshape(-1, 1)


class _Then(nn.Module):
    """``after(module(x))``: the suite's target actor followed by SB3's ``scale_action`` (td3_critic_target)."""

    def __init__(self, module, after):
        super().__init__()
        self.module, self.after = module, after

    def forward(self, x):
        return self.after(self.module(x))


class _Head(nn.Module):
    """One output of the suite's SAC policy ``obs -> (mean, log_std)`` as SAC's ``Actor.mu`` or ``Actor.log_std``."""

    def __init__(self, policy, index):
        super().__init__()
        self.policy, self.index = policy, index

    def forward(self, latent):
        return self.policy(latent)[self.index]


class _Lookup(nn.Module):
    """``Q(obs, action) = values[obs[0]] * one``: td_target's given ``next_q``, read back by the row index the next
    observation holds. ``one`` (1.0, exact) is a parameter for SB3's optimizer, losses and polyak_update to hold."""

    def __init__(self, values):
        super().__init__()
        self.register_buffer("values", th.as_tensor(_numpy(values), dtype=th.float32))
        self.one = nn.Parameter(th.ones(()))

    def forward(self, obs, action):
        return self.values[obs[:, 0].long()] * self.one


def _reoptimize(model, *modules):
    """Rebuild the optimizers of the modules whose networks the adapter replaced, as the policy builds them."""
    for module in modules:
        module.optimizer = model.policy.optimizer_class(module.parameters(), lr=model.lr_schedule(1),
                                                        **model.policy.optimizer_kwargs)


def _set_critics(critic, networks) -> None:
    """Put ``networks`` in place of a ContinuousCritic's q-networks (registered as qf0, qf1, ... and listed)."""
    assert len(networks) == len(critic.q_networks)
    for i, network in enumerate(networks):
        setattr(critic, f"qf{i}", network)
        critic.q_networks[i] = network


def _load_td3(model, actor, target_actor, critics, target_critics, *, to_action=None, scale=None) -> dict:
    """The suite's networks as DDPG's / TD3's: the actors become ``Actor.mu`` (SB3's Actor applies them to its flattened
    observation), the critics the q-networks of its ContinuousCritic. Returns the float32 copies by role."""
    O = model.observation_space.shape[0]
    copies = {"actor": _f32(actor), "target_actor": _f32(target_actor)}
    model.actor.mu = copies["actor"]
    model.actor_target.mu = copies["target_actor"] if scale is None else _Then(copies["target_actor"], scale)
    _set_critics(model.critic, [_QNetwork(_f32(c), O, to_action) for c in critics])
    _set_critics(model.critic_target, [_QNetwork(_f32(c), O, to_action) for c in target_critics])
    _reoptimize(model, model.actor, model.critic)
    return copies


def _load_sac(model, policy, critics, target_critics) -> nn.Module:
    """The suite's policy as SAC's Actor (net_arch []: ``mu`` and ``log_std`` read the flattened observation; SAC then
    clamps log_std to [-20, 2] and samples SquashedDiagGaussianDistribution), its critics as the q-networks."""
    O = model.observation_space.shape[0]
    copy_ = _f32(policy)
    model.actor.mu, model.actor.log_std = _Head(copy_, 0), _Head(copy_, 1)
    _set_critics(model.critic, [_QNetwork(_f32(c), O) for c in critics])
    _set_critics(model.critic_target, [_QNetwork(_f32(c), O) for c in target_critics])
    _reoptimize(model, model.actor, model.critic)
    return copy_


def _exposed(value: float, module: nn.Module, copy_: nn.Module) -> th.Tensor:
    """A float32 scalar equal to ``value`` (the loss train() logged) whose gradient with respect to each parameter of
    the suite's ``module`` is the gradient train() left on the same parameter of its float32 copy."""
    grads = dict(copy_.named_parameters())
    pairs = []
    for name, parameter in module.named_parameters():
        grad = grads[name].grad
        pairs.append((parameter, th.zeros_like(grads[name]) if grad is None else grad))
    out = th.tensor(float(value), dtype=th.float32)
    for parameter, grad in pairs:
        if parameter.requires_grad:
            out = out + ((parameter - parameter.detach()) * grad.to(parameter.dtype)).sum().to(th.float32)
    return out


def _batch_size(obs) -> int:
    return int(_numpy(obs).shape[0])


def td_target(rewards, next_q, terminated, truncated, gamma, handle_timeout_termination=True):
    """DDPG.train()'s critic target on a batch whose target critic returns ``next_q`` (row i's next observation is [i])."""
    B = len(rewards)
    index = np.arange(B, dtype=np.float64)[:, None]
    with _library_call():
        model = _off_policy(DDPG, index, np.zeros((B, 1)), rewards, index, terminated, truncated, gamma=float(gamma),
                            replay_buffer_kwargs={"handle_timeout_termination": handle_timeout_termination})
        _set_critics(model.critic, [_QNetwork(_Lookup(np.zeros(B)), 1)])
        _set_critics(model.critic_target, [_QNetwork(_Lookup(next_q), 1)])
        _reoptimize(model, model.critic)
        with _Controlled() as controlled:
            model.train(gradient_steps=1, batch_size=B)
    return controlled.targets[0].numpy().reshape(B)


def ddpg_critic_target(actor, critic, target_actor, target_critic, obs, actions, rewards, next_obs, terminated, truncated,
                       gamma):
    """DDPG.train()'s ``target_q_values`` (the argument of its critic loss)."""
    B = _batch_size(obs)
    with _library_call():
        model = _off_policy(DDPG, obs, actions, rewards, next_obs, terminated, truncated, gamma=float(gamma))
        _load_td3(model, actor, target_actor, [critic], [target_critic])
        with _Controlled() as controlled:
            model.train(gradient_steps=1, batch_size=B)
    return controlled.targets[0].reshape(B)


def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    """TD3.train()'s ``target_q_values`` in SB3's normalised action space (see the module docstring)."""
    B = _batch_size(obs)
    with _library_call():
        model = _off_policy(TD3, obs, actions, rewards, next_obs, terminated, truncated, low=low, high=high, gamma=float(gamma))
        policy = model.policy
        width = (model.action_space.high.astype(np.float64) - model.action_space.low) / 2.0  # scale_action's slope
        to_sb3 = lambda a: th.as_tensor(policy.scale_action(_numpy(a)), dtype=th.float32)
        from_sb3 = lambda a: th.as_tensor(policy.unscale_action(_numpy(a)), dtype=th.float32)
        _load_td3(model, actor, target_actor, [critic1, critic2], [target_critic1, target_critic2], to_action=from_sb3,
                  scale=to_sb3)
        model.target_noise_clip = th.as_tensor(float(noise_clip) / width, dtype=th.float32)
        with _Controlled(draws=[th.as_tensor(_numpy(noise) / width, dtype=th.float32)]) as controlled:
            model.train(gradient_steps=1, batch_size=B)
    return controlled.targets[0].reshape(B)


def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs, terminated,
                      truncated, gamma, alpha, noise):
    """SAC.train()'s ``target_q_values`` with ``ent_coef=alpha``; the noise is the second draw (the sample at next_obs)."""
    B = _batch_size(obs)
    with _library_call():
        model = _off_policy(SAC, obs, actions, rewards, next_obs, terminated, truncated, gamma=float(gamma),
                            ent_coef=float(alpha))
        _load_sac(model, policy, [critic1, critic2], [target_critic1, target_critic2])
        zeros = th.zeros(tuple(np.shape(_numpy(noise))))
        with _Controlled(draws=[zeros, th.as_tensor(_numpy(noise), dtype=th.float32)]) as controlled:
            model.train(gradient_steps=1, batch_size=B)
    return controlled.targets[0].reshape(B)


def _obs_only(obs, D):
    """The replay batch of an actor loss: the given observations, zero actions and rewards, no episode end."""
    obs = _numpy(obs)
    B = obs.shape[0]
    return obs, np.zeros((B, D)), np.zeros(B), obs, np.zeros(B, bool), np.zeros(B, bool)


def dpg_actor_loss(actor, critic, obs):
    """DDPG.train()'s actor loss (logged ``train/actor_loss``) and its gradient on the actor's parameters."""
    B = _batch_size(obs)
    with th.no_grad():
        D = actor(th.as_tensor(_numpy(obs)[:1], dtype=next(actor.parameters()).dtype)).shape[-1]
    with _library_call():
        # learning_rate 0: the critic's step before the actor loss leaves the critic as given
        model = _off_policy(DDPG, *_obs_only(obs, D), learning_rate=0.0)
        copies = _load_td3(model, actor, actor, [critic], [critic])
        with _Controlled():
            model.train(gradient_steps=1, batch_size=B)
    return _exposed(model.logger.name_to_value["train/actor_loss"], actor, copies["actor"])


def sac_actor_loss(policy, critic1, critic2, obs, alpha, noise):
    """SAC.train()'s actor loss with ``ent_coef=alpha`` (logged ``train/actor_loss``) and its gradient on the policy's
    parameters; the noise is the first draw (the sample at obs)."""
    B = _batch_size(obs)
    noise = th.as_tensor(_numpy(noise), dtype=th.float32)
    with _library_call():
        model = _off_policy(SAC, *_obs_only(obs, noise.shape[1]), learning_rate=0.0, ent_coef=float(alpha))
        copy_ = _load_sac(model, policy, [critic1, critic2], [critic1, critic2])
        with _Controlled(draws=[noise, th.zeros_like(noise)]):
            model.train(gradient_steps=1, batch_size=B)
    return _exposed(model.logger.name_to_value["train/actor_loss"], policy, copy_)


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    """SAC.train()'s ``ent_coef_loss`` with ``ent_coef="auto"``: ``log_ent_coef`` holds log_alpha, the actor's
    ``action_log_prob`` returns the given log_prob; target_entropy None is SAC's default ``"auto"``."""
    B = int(np.size(_numpy(log_prob)))
    leaf = th.as_tensor(_numpy(log_prob), dtype=th.float32).reshape(B).clone().requires_grad_(True)
    index = np.arange(B, dtype=np.float64)[:, None]
    seen = {}
    with _library_call():
        model = _off_policy(SAC, index, np.zeros((B, int(action_dim))), np.zeros(B), index, np.zeros(B, bool), np.zeros(B, bool),
                            target_entropy="auto" if target_entropy is None else float(target_entropy))
        with th.no_grad():
            model.log_ent_coef.copy_(th.as_tensor(_numpy(log_alpha), dtype=th.float32).reshape(1))

        def action_log_prob(obs):
            return th.zeros(len(obs), int(action_dim)), leaf[obs[:, 0].long()]

        def snapshot(optimizer, args, kwargs):  # just after ent_coef_loss.backward(), before anything else
            seen["log_alpha"] = model.log_ent_coef.grad.clone()
            seen["log_prob"] = th.zeros(B) if leaf.grad is None else leaf.grad.clone()

        model.actor.action_log_prob = action_log_prob
        model.ent_coef_optimizer.register_step_pre_hook(snapshot)
        with _Controlled():
            model.train(gradient_steps=1, batch_size=B)
    out = th.tensor(float(model.logger.name_to_value["train/ent_coef_loss"]), dtype=th.float32)
    for x, grad in ((log_alpha, seen["log_alpha"]), (log_prob, seen["log_prob"])):
        if isinstance(x, th.Tensor) and x.requires_grad:
            out = out + ((x - x.detach()) * grad.reshape(x.shape).to(x.dtype)).sum().to(th.float32)
    return out


def polyak_update(target, online, tau):
    """``stable_baselines3.common.utils.polyak_update([online], [target], tau)`` on float32 tensors (SB3's networks)."""
    target_param = th.tensor(_numpy(target), dtype=th.float32)
    sb3_polyak_update([th.tensor(_numpy(online), dtype=th.float32)], [target_param], float(tau))
    return target_param.numpy()


class _Vector(nn.Module):
    """A q-network whose parameters are one vector ``theta`` (P,), scored 0 (the critic's loss plays no part here)."""

    def __init__(self, theta):
        super().__init__()
        self.theta = nn.Parameter(th.as_tensor(_numpy(theta), dtype=th.float32).clone())

    def forward(self, x):
        return x[:, :1] * 0.0 + (self.theta * 0.0).sum()


class _Scripted(th.optim.Optimizer):
    """The critic's optimizer: its n-th ``step()`` sets the critic's parameter vector to ``history[n - 1]`` (the
    protocol's online parameters after each gradient step), first calling ``before()``."""

    def __init__(self, parameter, history, before):
        super().__init__([parameter], {"lr": 0.0})
        self.parameter, self.history, self.before, self.n = parameter, history, before, 0

    @th.no_grad()
    def step(self, closure=None):
        self.before()
        self.parameter.copy_(self.history[self.n])
        self.n += 1


def _target_updates(algorithm, target, online, tau, period, gradient_steps, **kwargs):
    """``algorithm.train(gradient_steps=k)`` for each k of ``gradient_steps``, one critic whose parameters are the
    protocol's vector, its optimizer scripted to the online history; returns the target after every gradient step."""
    online = th.as_tensor(_numpy(online), dtype=th.float32)
    P = online.shape[1]
    with _library_call():
        model = _off_policy(algorithm, np.zeros((1, 1)), np.zeros((1, 1)), np.zeros(1), np.zeros((1, 1)), np.zeros(1, bool),
                            np.zeros(1, bool), tau=float(tau), policy_kwargs={"n_critics": 1}, **kwargs)
        _set_critics(model.critic, [_Vector(np.zeros(P))])
        _set_critics(model.critic_target, [_Vector(target)])
        history = []  # the target before each gradient step's critic step: the state after the previous step
        model.critic.optimizer = _Scripted(model.critic.qf0.theta, online,
                                           lambda: history.append(model.critic_target.qf0.theta.detach().clone()))
        for steps in gradient_steps:
            model.train(gradient_steps=int(steps), batch_size=1)
    history.append(model.critic_target.qf0.theta.detach().clone())
    return th.stack(history[1:]).numpy()


def target_network_updates(target, online, tau, period, gradient_steps):
    """SAC.train() with ``tau`` and ``target_update_interval=period``: the critic target after every gradient step."""
    return _target_updates(SAC, target, online, tau, period, gradient_steps, target_update_interval=int(period))


def td3_actor_update_steps(gradient_steps, policy_delay):
    """TD3.train(gradient_steps=k) for each k, ``policy_delay`` given, everything else TD3's defaults, on a replay
    buffer of four fixed random transitions: for each critic step, whether the actor's optimizer stepped, and whether
    the target networks moved (the mean over critic_target and actor_target of "any parameter changed")."""
    rng = np.random.default_rng(0)
    obs, next_obs, actions = rng.uniform(-1, 1, (4, 2)), rng.uniform(-1, 1, (4, 2)), rng.uniform(-1, 1, (4, 1))
    with _library_call():
        model = _off_policy(TD3, obs, actions, rng.uniform(-1, 1, 4), next_obs, np.zeros(4, bool), np.zeros(4, bool),
                            policy_delay=int(policy_delay))
        targets = lambda: [th.cat([p.detach().flatten().clone() for p in m.parameters()])
                           for m in (model.critic_target, model.actor_target)]
        before_critic_steps, actor_steps = [], set()
        model.critic.optimizer.register_step_pre_hook(lambda *_: before_critic_steps.append(targets()))
        model.actor.optimizer.register_step_pre_hook(lambda *_: actor_steps.add(len(before_critic_steps)))
        for steps in gradient_steps:
            model.train(gradient_steps=int(steps), batch_size=4)
        states = before_critic_steps + [targets()]
    N = len(before_critic_steps)
    actor = np.array([1.0 if n in actor_steps else 0.0 for n in range(1, N + 1)])
    moved = np.array([[float(not th.equal(a, b)) for a, b in zip(states[n], states[n + 1])] for n in range(N)])
    return actor, moved.mean(axis=1)


# ---------------------------------------------------------------------------------------------
# variants


def _td3_target_network_updates(target, online, tau, period, gradient_steps):
    """TD3.train() with ``tau`` and ``policy_delay=period``: the critic target after every gradient step."""
    return _target_updates(TD3, target, online, tau, period, gradient_steps, policy_delay=int(period))


def _td_target_timeouts_as_terminal(rewards, next_q, terminated, truncated, gamma):
    """td_target with ``replay_buffer_kwargs={"handle_timeout_termination": False}``."""
    return td_target(rewards, next_q, terminated, truncated, gamma, handle_timeout_termination=False)


td3_target_updates = SimpleNamespace(
    __doc__="SB3's TD3.train() as the target-network schedule: the critic target is Polyak-updated together with the "
            "delayed actor, on a counter (self._n_updates) kept across train() calls, with policy_delay as the period",
    target_network_updates=_td3_target_network_updates,
)
timeouts_as_terminal = SimpleNamespace(
    __doc__="SB3's ReplayBuffer with handle_timeout_termination=False (documented; required by optimize_memory_usage=True): "
            "a time-limit end is stored as a terminal transition",
    td_target=_td_target_timeouts_as_terminal,
)
clip_range_vf = SimpleNamespace(
    __doc__="SB3's PPO with clip_range_vf = value_clip_eps (value clipping, off by default): the clipped prediction "
            "V_old + clamp(V - V_old, -eps, eps) alone, sb3.xfail",
    ppo_update=_ppo_update_clip_range_vf,
    RLSPEC_CONVENTIONS={**RLSPEC_CONVENTIONS, "value_clipping": "config"},
)
VARIANTS = ("td3_target_updates", "timeouts_as_terminal", "clip_range_vf")


# ======================================================================================
# Normalisation and the diagnostics of an update (spec/clauses/35_normalisation.toml), kept in one section.
#
# - running_moments: ``common.running_mean_std.RunningMeanStd(shape=(D,))`` (epsilon=1e-4: count 1e-4, mean 0,
#   variance 1, declared), one ``update(batch)`` per batch. merge_moments: ``RunningMeanStd.combine`` of two objects
#   holding the given statistics.
# - normalize_observations / scale_rewards: ``VecNormalize`` (its defaults: clip_obs = clip_reward = 10, epsilon 1e-8
#   under the square root) on a ``DummyVecEnv`` of N environments replaying the columns: ``reset()`` gives row 0,
#   each ``step`` the next row; ``training`` is False from step ``train_steps`` on. For rewards (``norm_obs=False``,
#   ``gamma``), DummyVecEnv makes ``done = terminated or truncated`` and VecNormalize zeroes ``returns[dones]`` after
#   dividing; DummyVecEnv stores rewards as float32.
# - diagnostic_approx_kl / _clip_fraction / _entropy: one real ``PPO.train()`` (n_epochs=1) on a rollout buffer
#   holding ``logp_old``, whose policy's ``evaluate_actions`` returns the suite's ``logp_new`` (and, for the entropy,
#   ``CategoricalDistribution.proba_distribution(logits).entropy()``, SB3's own distribution); the values are
#   train()'s logs, ``train/approx_kl``, ``train/clip_fraction`` and ``-train/entropy_loss``, each the mean of the
#   per-minibatch values (declared ``diagnostic_average = "minibatches"``). SB3's minibatches are ``batch_size``
#   samples of a shuffled buffer, the last one smaller: ``minibatch_end`` must have that form, and the adapter
#   places sample j at the buffer position that SB3's own ``np.random.permutation`` (after ``_library_call``'s
#   seeding) reads j-th, so the minibatches hold the protocol's samples in order; the policy checks that they do.
# - diagnostic_explained_variance: ``train/explained_variance``, ``explained_variance(rollout_buffer.values.flatten(),
#   rollout_buffer.returns.flatten())`` of the float32 buffer, from the same kind of train() call.

from stable_baselines3.common.distributions import CategoricalDistribution  # noqa: E402
from stable_baselines3.common.running_mean_std import RunningMeanStd  # noqa: E402
from stable_baselines3.common.vec_env import VecNormalize  # noqa: E402

RLSPEC_CONVENTIONS.update({
    "moments_initial_count": 1e-4,  # RunningMeanStd(epsilon=1e-4): count 1e-4, mean 0, var 1
    "diagnostic_average": "minibatches",  # np.mean(approx_kl_divs), np.mean(clip_fractions), np.mean(entropy_losses)
    # VecNormalize: clip_obs = clip_reward = 10, epsilon 1e-8 in sqrt(var + epsilon), update then normalise, one
    # RunningMeanStd for all environments; approx_kl is k3; explained_variance is NaN for constant returns: defaults
})


def running_moments(x, batch_end):
    """RunningMeanStd(shape=(D,)).update(batch) per batch."""
    rms = RunningMeanStd(shape=x.shape[1:])
    start = 0
    for end in np.flatnonzero(batch_end):
        rms.update(x[start:end + 1])
        start = end + 1
    return rms.mean, rms.var, np.asarray(float(rms.count))


def merge_moments(mean_a, var_a, count_a, mean_b, var_b, count_b):
    """RunningMeanStd.combine: a.update_from_moments(b.mean, b.var, b.count)."""
    a, b = RunningMeanStd(shape=np.shape(mean_a)), RunningMeanStd(shape=np.shape(mean_b))
    a.mean, a.var, a.count = np.array(mean_a, dtype=np.float64), np.array(var_a, dtype=np.float64), float(count_a)
    b.mean, b.var, b.count = np.array(mean_b, dtype=np.float64), np.array(var_b, dtype=np.float64), float(count_b)
    a.combine(b)
    return a.mean, a.var, np.asarray(float(a.count))


class _NormReplay(gym.Env):
    """One column of the suite's stream: ``reset()`` returns the current row's observation, ``step()`` moves to the
    next row (observation, reward, flags). DummyVecEnv resets it after an episode end; the rows go on."""

    action_space = spaces.Discrete(2)

    def __init__(self, observations, rewards, terminated, truncated):
        self.observations, self.rewards = np.asarray(observations, dtype=np.float64), rewards
        self.terminated, self.truncated = terminated, truncated
        self.observation_space = spaces.Box(-np.inf, np.inf, self.observations.shape[1:], np.float64)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        return self.observations[min(self.t, len(self.observations) - 1)].copy(), {}

    def step(self, action):
        t, self.t = self.t, self.t + 1
        return (self.observations[min(self.t, len(self.observations) - 1)].copy(), float(self.rewards[t]),
                bool(self.terminated[t]), bool(self.truncated[t]), {})


def _vec_normalize(observations, rewards, terminated, truncated, **kwargs) -> VecNormalize:
    """A VecNormalize over a DummyVecEnv of the columns (observations (T, N, D), the rest (T, N))."""
    N = observations.shape[1]
    columns = [_NormReplay(observations[:, j], rewards[:, j], terminated[:, j], truncated[:, j]) for j in range(N)]
    return VecNormalize(DummyVecEnv([(lambda column=column: column) for column in columns]), **kwargs)


def normalize_observations(obs, train_steps):
    """VecNormalize(norm_obs=True, norm_reward=False): reset(), then one step per row; training = t < train_steps."""
    T, N, _ = obs.shape
    zeros, flags = np.zeros((T, N)), np.zeros((T, N), dtype=bool)
    with _library_call():
        env = _vec_normalize(obs, zeros, flags, flags, norm_obs=True, norm_reward=False)
        env.training = train_steps > 0
        out = [env.reset()]
        for t in range(1, T):
            env.training = t < train_steps
            out.append(env.step(np.zeros(N, dtype=np.int64))[0])
    return np.stack(out)


def scale_rewards(rewards, terminated, truncated, gamma):
    """VecNormalize(norm_obs=False, norm_reward=True, gamma=gamma): the normalised reward of every step."""
    T, N = rewards.shape
    with _library_call():
        env = _vec_normalize(np.zeros((T, N, 1)), rewards, terminated, truncated, norm_obs=False, norm_reward=True,
                             gamma=float(gamma))
        env.reset()
        out = [env.step(np.zeros(N, dtype=np.int64))[1] for _ in range(T)]
    return np.stack(out)


def _sb3_minibatch_size(minibatch_end, n: int) -> int:
    """SB3's batch_size for these minibatches, or ValueError if SB3 cannot form them."""
    if minibatch_end is None:
        return n
    sizes = np.diff(np.concatenate([[-1], np.flatnonzero(minibatch_end)]))
    size = int(sizes[0])
    if not np.all(sizes[:-1] == size) or sizes[-1] > size or not minibatch_end[-1]:
        raise ValueError(f"minibatches of {sizes.tolist()} samples: SB3's rollout buffer yields batch_size samples per "
                         "minibatch, the last one smaller")
    return size


class _Minibatches(ActorCriticPolicy):
    """evaluate_actions returns the suite's log-probabilities (and entropies) for the samples whose observations
    are their indices, and checks that each minibatch holds the protocol's samples in order."""

    given: dict

    def evaluate_actions(self, obs, actions):
        rows = obs[:, 0].long()
        first = self.given["next"]
        if rows.tolist() != list(range(first, first + len(rows))):
            raise RuntimeError(f"SB3 formed a minibatch of samples {rows.tolist()}: the adapter's placement failed")
        self.given["next"] = first + len(rows)
        n = len(rows)
        return th.zeros(n), self.given["log_prob"][rows], self.given["entropy"][rows]


def _train_diagnostics(logp_new, logp_old, minibatch_end=None, *, clip_eps=0.2, entropy=None, values=None, returns=None):
    """One PPO.train() (one epoch) on the suite's samples in SB3's minibatches; returns train()'s logs."""
    logp_new, logp_old = (np.asarray(x, dtype=np.float64).reshape(-1) for x in (logp_new, logp_old))
    n = len(logp_old)
    batch_size = _sb3_minibatch_size(None if minibatch_end is None else np.asarray(minibatch_end, dtype=bool), n)
    with _library_call():
        model = PPO(_Minibatches, DummyVecEnv([_SampleIndex]), n_steps=n, batch_size=batch_size, n_epochs=1,
                    clip_range=float(clip_eps), normalize_advantage=False, device="cpu", policy_kwargs={"net_arch": []})
        model.set_logger(_silent_logger())
        state = np.random.get_state()
        order = np.random.permutation(n)  # the permutation rollout_buffer.get() will draw next
        np.random.set_state(state)
        sample = np.empty(n, dtype=np.int64)
        sample[order] = np.arange(n)  # slot order[j] holds sample j, so minibatch k (slots order[kb:(k+1)b]) is kb..(k+1)b-1
        buffer = model.rollout_buffer
        values = np.zeros(n) if values is None else np.asarray(values, dtype=np.float64)
        returns = np.zeros(n) if returns is None else np.asarray(returns, dtype=np.float64)
        for j in sample:  # slot by slot
            buffer.add(np.array([[j]], dtype=np.float32), np.zeros((1, 1)), np.zeros(1), np.zeros(1),
                       th.tensor([values[j]]), th.tensor([logp_old[j]]))
        buffer.returns[:, 0] = returns[sample]
        model.policy.given = {"next": 0, "log_prob": th.tensor(logp_new, dtype=th.float32).requires_grad_(True),
                              "entropy": th.zeros(n) if entropy is None else entropy}
        model.train()
    return dict(model.logger.name_to_value)


def diagnostic_approx_kl(logp_new, logp_old, minibatch_end=None):
    """train/approx_kl: the mean over the minibatches of mean((exp(log_ratio) - 1) - log_ratio)."""
    return np.asarray(_train_diagnostics(logp_new, logp_old, minibatch_end)["train/approx_kl"], dtype=np.float32)


def diagnostic_clip_fraction(logp_new, logp_old, clip_eps, minibatch_end=None):
    """train/clip_fraction: the mean over the minibatches of mean(|ratio - 1| > clip_range)."""
    return np.asarray(_train_diagnostics(logp_new, logp_old, minibatch_end, clip_eps=clip_eps)["train/clip_fraction"],
                      dtype=np.float32)


def diagnostic_entropy(logits, minibatch_end=None):
    """-train/entropy_loss with the entropies of CategoricalDistribution(logits), SB3's own distribution."""
    logits = th.as_tensor(np.asarray(logits), dtype=th.float32)
    entropy = CategoricalDistribution(logits.shape[1]).proba_distribution(logits).entropy()
    zeros = np.zeros(len(logits))
    return np.asarray(-_train_diagnostics(zeros, zeros, minibatch_end, entropy=entropy)["train/entropy_loss"], dtype=np.float32)


def diagnostic_explained_variance(values, returns):
    """train/explained_variance: explained_variance(buffer values, buffer returns) of the float32 rollout buffer."""
    zeros = np.zeros(len(values))
    logged = _train_diagnostics(zeros, zeros, values=values, returns=returns)["train/explained_variance"]
    return np.asarray(logged, dtype=np.float64)

# ---------------------------------------------------------------------------------------------
# compatibility with older releases in RELEASES (nothing here changes what a current release runs)


def _rollout_buffer_class(model):
    """``(rollout_buffer_class, rollout_buffer_kwargs)`` as ``_setup_model`` uses them. SB3 2.0 has neither
    attribute: its ``_setup_model`` builds ``RolloutBuffer`` (Box observations) with no extra arguments."""
    from stable_baselines3.common.buffers import RolloutBuffer

    return getattr(model, "rollout_buffer_class", RolloutBuffer), getattr(model, "rollout_buffer_kwargs", {})

"""The ``sb3`` adapter against stable-baselines3 2.9: its verdicts (tests/adapters/expected/sb3.toml) and
the library facts the adapter relies on.

Skipped when stable-baselines3 is not installed, unless RLSPEC_REQUIRE_ADAPTERS=1 (.ci/adapters),
where a missing library is an error.
"""

import os

import numpy as np
import pytest

if os.environ.get("RLSPEC_REQUIRE_ADAPTERS"):
    import stable_baselines3  # noqa: F401 - .ci/adapters: the library must be there
else:
    pytest.importorskip("stable_baselines3")

import torch  # noqa: E402

from _verdicts import verdict_tests  # noqa: E402

from rlspec.checks.adapters import sb3  # noqa: E402

test_verdict, test_unlisted_clauses, test_table_names_every_candidate = verdict_tests("sb3")


def test_version_is_the_one_the_adapter_was_written_against():
    assert sb3.RLSPEC_VERSION.startswith("stable-baselines3 2.9."), sb3.RLSPEC_VERSION


P1 = dict(rewards=np.ones(4), values=np.full(4, 0.5), next_values=np.array([0.5, 0.5, 0.5, 2.0]),
          terminated=np.array([False, True, False, False]), truncated=np.zeros(4, bool), gamma=0.5, lam=0.5)
P2 = {**P1, "next_values": np.array([0.5, 3.0, 0.5, 2.0]), "terminated": np.zeros(4, bool),
      "truncated": np.array([False, True, False, False])}


def test_gae_known_answers():
    """P1, P2 and P2 with both flags (terminal wins) through collect_rollouts, float32 like the buffer."""
    advantages, returns = sb3.gae(**P1)
    assert advantages.dtype == np.float32 and advantages.tolist() == [0.875, 0.5, 1.125, 1.5]
    assert returns.tolist() == [1.375, 1.0, 1.625, 2.0]
    assert sb3.gae(**P2)[0].tolist() == [1.25, 2.0, 1.125, 1.5]
    assert sb3.gae(**{**P2, "terminated": P2["truncated"]})[0].tolist() == [0.875, 0.5, 1.125, 1.5]


def test_truncation_is_handled_by_collect_rollouts_not_by_the_buffer():
    """RolloutBuffer alone treats every done as terminal (P1's answer on P2), so the
    adapter's correct P2 comes from collect_rollouts' reward fold-in."""
    from gymnasium import spaces
    from stable_baselines3.common.buffers import RolloutBuffer

    buffer = RolloutBuffer(4, spaces.Box(-1, 1, (1,)), spaces.Discrete(2), "cpu", gae_lambda=0.5, gamma=0.5)
    starts = [0.0, 0.0, 1.0, 0.0]  # the step after the end starts an episode
    for t in range(4):
        buffer.add(np.zeros((1, 1)), np.zeros((1, 1)), np.ones(1), np.array([starts[t]]), torch.tensor([0.5]), torch.zeros(1))
    buffer.compute_returns_and_advantage(torch.tensor([2.0]), np.array([False]))
    assert buffer.advantages[:, 0].tolist() == [0.875, 0.5, 1.125, 1.5]


def test_inconsistent_critic_is_refused():
    bad = {**P1, "terminated": np.zeros(4, bool), "next_values": np.array([0.7, 0.5, 0.5, 2.0])}
    with pytest.raises(ValueError, match="next stored observation"):
        sb3.gae(**bad)


def test_ppo_gradient_table_p5():
    for A, r, expected in [(2, 0.5, -1.0), (2, 1.0, -2.0), (2, 1.5, 0.0), (-2, 0.5, 0.0), (-2, 1.0, 2.0), (-2, 1.5, 3.0)]:
        logp_new = torch.tensor([np.log(r)], dtype=torch.float64, requires_grad=True)
        loss = sb3.ppo_clip_loss(logp_new, torch.zeros(1, dtype=torch.float64), torch.tensor([float(A)]), 0.2)
        (grad,) = torch.autograd.grad(loss, logp_new)
        assert grad.item() == pytest.approx(expected, abs=1e-6), (A, r)


def test_value_loss_and_normalisation_conventions_p8_p10():
    V = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
    loss = sb3.ppo_value_loss(V, torch.tensor([2.0]))
    assert loss.item() == 1.0 and torch.autograd.grad(loss, V)[0].item() == -2.0  # MSE, no 0.5
    clipped = sb3.ppo_value_loss(V, torch.tensor([0.5]), torch.tensor([0.0]), 0.2)
    assert clipped.item() == pytest.approx(0.09) and torch.autograd.grad(clipped, V)[0].item() == 0.0  # clipped prediction only
    assert sb3.normalize_advantages(torch.tensor([1.0, 2.0, 3.0, 4.0])).tolist() == pytest.approx(
        [-1.161895, -0.3872983, 0.3872983, 1.161895], abs=1e-6)  # ddof 1
    assert sb3.normalize_advantages(torch.tensor([3.0])).tolist() == [3.0]  # a one-sample minibatch is left alone


def test_squashed_gaussian_p11():
    """The Jacobian term is there, in the eps form: right at u = 1 (-0.5514), 4.8 nats off at u = 10."""
    at = lambda u: sb3.tanh_gaussian_log_prob(np.zeros((1, 1)), np.zeros((1, 1)), np.array([[u]])).item()
    assert at(1.0) == pytest.approx(-0.5514, abs=1e-4)
    exact_10 = -0.5 * np.log(2 * np.pi) - 50.0 - 2 * (np.log(2) - 10.0 - np.log1p(np.exp(-20.0)))
    assert at(10.0) - exact_10 == pytest.approx(-4.80, abs=0.01)


def test_calls_leave_global_rngs_alone():
    state = np.random.get_state()[1].copy(), torch.get_rng_state().clone()
    sb3.gae(**P2)
    sb3.ppo_clip_loss(torch.zeros(3), torch.zeros(3), torch.ones(3), 0.2)
    assert np.array_equal(np.random.get_state()[1], state[0]) and torch.equal(torch.get_rng_state(), state[1])


# ---------------------------------------------------------------------------------------------
# off-policy: DDPG, TD3, SAC


def _modules(case, dtype=torch.float64):
    from rlspec.checks.clauses.offpolicy import MODULES, kind_of

    return {role: MODULES[kind_of(role)](spec, dtype) for role, spec in case.nets.items()}


def _batch(case):
    t = lambda x: torch.as_tensor(x, dtype=torch.float64)
    return dict(obs=t(case.obs), actions=t(case.actions), rewards=t(case.rewards), next_obs=t(case.next_obs),
                terminated=torch.as_tensor(case.terminated), truncated=torch.as_tensor(case.truncated), gamma=case.gamma)


def test_td_target_through_the_replay_buffers_timeouts():
    """DummyVecEnv + _store_transition + ReplayBuffer: a truncated row bootstraps, terminated wins over truncated;
    with handle_timeout_termination=False (the variant) a truncated row is terminal."""
    args = dict(rewards=np.array([1.0, 1.0, 0.5, -2.0]), next_q=np.array([10.0, 10.0, -4.0, 3.0]),
                terminated=np.array([False, False, False, True]), truncated=np.array([True, False, True, True]), gamma=0.9)
    y = sb3.td_target(**args)
    assert y.dtype == np.float32 and y.tolist() == pytest.approx([10.0, 10.0, -3.1, -2.0], abs=1e-6)
    assert sb3.timeouts_as_terminal.td_target(**args).tolist() == [1.0, 10.0, 0.5, -2.0]


def test_sac_soft_target_worked_by_hand():
    """SAC-SOFT-TARGET's hand case through SAC.train(): 1 + 0.5 (min(2, 3) - 0.1 (-1)) = 2.05 (the noise is the draw at
    next_obs; the eps form's log(1 + 1e-6) is below float32's resolution here)."""
    from rlspec.checks.clauses.offpolicy import HAND_SAC

    m = _modules(HAND_SAC)
    y = sb3.sac_critic_target(m["policy"], m["critic1"], m["critic2"], m["target_critic1"], m["target_critic2"],
                              **_batch(HAND_SAC), alpha=HAND_SAC.alpha, noise=torch.as_tensor(HAND_SAC.noise))
    assert y.dtype == torch.float32 and y.item() == pytest.approx(2.05, abs=1e-6)


def test_td3_target_in_sb3s_normalised_action_space():
    """TD3 clamps to [-1, 1] in its normalised units; through scale_action / unscale_action that is [low, high]: the
    known batch with narrow bounds matches the clause's float64 target to float32 accuracy."""
    from dataclasses import replace

    from rlspec.checks.clauses.offpolicy import KNOWN, TD3_KNOWN_NOISE, td3_expected

    case = replace(KNOWN, noise=TD3_KNOWN_NOISE, noise_clip=1.0, low=np.array([-0.6, -0.2]), high=np.array([0.8, 0.25]))
    m = _modules(case)
    y = sb3.td3_critic_target(m["actor"], m["critic1"], m["critic2"], m["target_actor"], m["target_critic1"], m["target_critic2"],
                              **_batch(case), noise=torch.as_tensor(case.noise), noise_clip=case.noise_clip,
                              low=torch.as_tensor(case.low), high=torch.as_tensor(case.high))
    expected, _, _ = td3_expected(case, 2.0**-24, "bounds")
    assert np.abs(y.numpy() - expected).max() < 1e-5


def test_actor_losses_reach_the_actor_and_the_temperature_loss_is_in_log_alpha():
    """DPG: d loss / d bias = -mean_b dQ/da (1 - mu^2); SAC's temperature loss at log_alpha = log 0.5, log_prob =
    (-1, 0.5): -0.8664340 with gradient 1.25 (target -1) and 3.25 (the default, -3 for three action dimensions), and
    no gradient into log_prob."""
    from rlspec.checks.clauses.offpolicy import KNOWN, actor_np, critic_grad_np

    m = _modules(KNOWN)
    loss = sb3.dpg_actor_loss(m["actor"], m["critic"], torch.as_tensor(KNOWN.obs))
    (g_bias,) = torch.autograd.grad(loss, [m["actor"].bias])
    mu = actor_np(KNOWN.nets["actor"], KNOWN.obs)
    expected = -(critic_grad_np(KNOWN.nets["critic"], KNOWN.obs, mu) * (1 - mu**2)).mean(0)
    assert g_bias.numpy() == pytest.approx(expected, abs=1e-6)

    log_alpha = torch.tensor(np.log(0.5), dtype=torch.float64, requires_grad=True)
    log_prob = torch.tensor([-1.0, 0.5], dtype=torch.float64, requires_grad=True)
    loss = sb3.sac_alpha_loss(log_alpha, log_prob, 2, -1.0)
    g_alpha, g_logp = torch.autograd.grad(loss, [log_alpha, log_prob], allow_unused=True)
    assert loss.item() == pytest.approx(-0.8664340, abs=1e-6) and g_alpha.item() == pytest.approx(1.25, abs=1e-6)
    assert g_logp is None or not g_logp.any()
    loss = sb3.sac_alpha_loss(log_alpha, log_prob, 3)
    assert torch.autograd.grad(loss, [log_alpha])[0].item() == pytest.approx(3.25, abs=1e-6)


def test_polyak_update_and_td3_delays():
    assert sb3.polyak_update(np.array([1.0, 2.0, -3.0]), np.array([0.0, 4.0, 1.0]), 0.25).tolist() == [0.75, 2.5, -2.0]
    actor, targets = sb3.td3_actor_update_steps((1, 1, 1, 1, 1, 1), 2)  # policy_delay 2, one critic step per call
    assert actor.tolist() == targets.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    actor, targets = sb3.td3_actor_update_steps((3, 1, 2), 2)
    assert actor.tolist() == targets.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]


def test_sac_target_update_interval_restarts_in_every_call():
    """bugs-found 17 (H6): SAC copies (tau = 1, target_update_interval = 3) on steps 1, 3, 5, 7, 8 of calls of
    2, 2, 2, 1, 2 gradient steps (the clause's known case: 3, 6, 9); TD3's policy_delay schedule copies on 3, 6, 9."""
    online = np.arange(1.0, 10.0)[:, None]  # the online parameter after step n is n
    calls = (2, 2, 2, 1, 2)
    sac = sb3.target_network_updates(np.zeros(1), online, 1.0, 3, calls)[:, 0]
    assert sac.tolist() == [1.0, 1.0, 3.0, 3.0, 5.0, 5.0, 7.0, 8.0, 8.0]
    td3 = sb3.td3_target_updates.target_network_updates(np.zeros(1), online, 1.0, 3, calls)[:, 0]
    assert td3.tolist() == [0.0, 0.0, 3.0, 3.0, 3.0, 6.0, 6.0, 6.0, 9.0]
    every_step = sb3.target_network_updates(np.zeros(1), online[:4], 1.0, 2, (1, 1, 1, 1))[:, 0]
    assert every_step.tolist() == [1.0, 2.0, 3.0, 4.0]  # one step per call: the interval is ignored


def test_off_policy_calls_leave_global_state_and_the_suites_networks_alone():
    from dataclasses import replace

    from rlspec.checks.clauses.offpolicy import KNOWN, SAC_KNOWN_NOISE

    case = replace(KNOWN, noise=SAC_KNOWN_NOISE)
    m = _modules(case)
    before = {role: [p.detach().clone() for p in module.parameters()] for role, module in m.items()}
    state = np.random.get_state()[1].copy(), torch.get_rng_state().clone(), torch.get_default_dtype()
    sb3.sac_actor_loss(m["policy"], m["critic1"], m["critic2"], torch.as_tensor(case.obs), 0.2, torch.as_tensor(case.noise))
    sb3.td3_actor_update_steps((2, 1), 2)
    assert np.array_equal(np.random.get_state()[1], state[0]) and torch.equal(torch.get_rng_state(), state[1])
    assert torch.get_default_dtype() == state[2] and torch.overrides._get_current_function_mode() is None
    for role, module in m.items():
        assert all(torch.equal(p, q) for p, q in zip(module.parameters(), before[role])), role


# ---------------------------------------------------------------------------------------------
# normalisation (spec/clauses/35_normalisation.toml): VecNormalize and PPO.train's logged diagnostics


def test_vec_normalize_resets_the_return_after_every_done():
    """gamma 1/2, rewards 1, one environment truncated after step 1: the third reward is divided by the std of the
    returns [1, 1.5, 1] (with the 1e-4 prior), as the reference's accumulator restarts."""
    rewards = np.ones((3, 1))
    truncated = np.array([[False], [True], [False]])
    scaled = sb3.scale_rewards(rewards, np.zeros((3, 1), dtype=bool), truncated, 0.5)
    seen = np.array([1.0, 1.5, 1.0])
    count = 1e-4 + 3
    mean = seen.sum() / count
    var = (1e-4 * (1 + mean**2) + ((seen - mean) ** 2).sum()) / count
    assert float(scaled[2, 0]) == pytest.approx(1 / np.sqrt(var + 1e-8), rel=1e-6)


def test_logged_diagnostics_average_the_minibatches():
    """minibatches of 3 and 1 (batch_size 3): clip_fraction is the mean of the two minibatches' fractions."""
    new = np.array([0.0, 0.0, 0.0, 0.5])
    old = np.zeros(4)
    fraction = sb3.diagnostic_clip_fraction(new, old, 0.2, np.array([False, False, True, True]))
    assert float(fraction) == pytest.approx((0.0 + 1.0) / 2)

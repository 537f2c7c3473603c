"""The ``skrl`` adapter against skrl 2.1: its verdicts (tests/adapters/expected/skrl.toml, for skrl's
defaults and its variants) and the library facts behind them.

Skipped when skrl is not installed, unless RLSPEC_REQUIRE_ADAPTERS=1 (.ci/adapters), where a
missing library is an error.
"""

import os

import numpy as np
import pytest

if os.environ.get("RLSPEC_REQUIRE_ADAPTERS"):
    import skrl as _skrl  # noqa: F401 - .ci/adapters: the library must be there
else:
    pytest.importorskip("skrl")

import torch  # noqa: E402
from _verdicts import verdict_tests  # noqa: E402

from rlspec.checks.adapters import skrl  # noqa: E402

test_verdict, test_unlisted_clauses, test_table_names_every_candidate = verdict_tests("skrl")


def test_version_is_the_one_the_adapter_was_written_against():
    assert skrl.RLSPEC_VERSION.startswith("skrl 2.1."), skrl.RLSPEC_VERSION


P1 = dict(rewards=np.ones(4), values=np.full(4, 0.5), next_values=np.array([0.5, 0.5, 0.5, 2.0]),
          terminated=np.array([False, True, False, False]), truncated=np.zeros(4, bool), gamma=0.5, lam=0.5)
P2 = {**P1, "next_values": np.array([0.5, 3.0, 0.5, 2.0]), "terminated": np.zeros(4, bool),
      "truncated": np.array([False, True, False, False])}
P2_BOTH = {**P2, "terminated": P2["truncated"]}


def test_gae_known_answers():
    assert skrl.gae(**P1)[0].tolist() == [0.875, 0.5, 1.125, 1.5]
    assert skrl.gae(**P2)[0].tolist() == [1.0078125, 1.03125, 1.125, 1.5]  # the leak of the default
    bootstrap = skrl.time_limit_bootstrap.gae
    assert bootstrap(**P1)[0].tolist() == [0.875, 0.5, 1.125, 1.5]
    assert bootstrap(**P2)[0].tolist() == [1.25, 2.0, 1.125, 1.5]
    assert bootstrap(**P2_BOTH)[0].tolist() == [1.25, 2.0, 1.125, 1.5]  # terminal should win: [0.875, 0.5, ...]


def test_ppo_gradient_table_p5():
    for A, r, expected in [(2, 0.5, -1.0), (2, 1.0, -2.0), (2, 1.5, 0.0), (-2, 0.5, 0.0), (-2, 1.0, 2.0), (-2, 1.5, 3.0)]:
        logp_new = torch.tensor([np.log(r)], dtype=torch.float64, requires_grad=True)
        loss = skrl.ppo_clip_loss(logp_new, torch.zeros(1, dtype=torch.float64), torch.tensor([float(A)]), 0.2)
        (grad,) = torch.autograd.grad(loss, logp_new)
        assert grad.item() == pytest.approx(expected, abs=1e-6), (A, r)


def test_value_loss_and_normalisation_conventions_p8_p10():
    V = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
    loss = skrl.ppo_value_loss(V, torch.tensor([2.0]))
    assert loss.item() == 1.0 and torch.autograd.grad(loss, V)[0].item() == -2.0  # value_loss_scale 1: MSE, no 0.5
    clipped = skrl.ppo_value_loss(V, torch.tensor([0.5]), torch.tensor([0.0]), 0.2)
    assert clipped.item() == pytest.approx(0.09) and torch.autograd.grad(clipped, V)[0].item() == 0.0
    assert skrl.normalize_advantages(torch.tensor([1.0, 2.0, 3.0, 4.0])).tolist() == pytest.approx(
        [-1.161895, -0.3872983, 0.3872983, 1.161895], abs=1e-6)
    assert np.isnan(skrl.normalize_advantages(torch.tensor([3.0])).item())


def test_the_compute_gae_stub_is_removed_after_an_update():
    from skrl.agents.torch.ppo import ppo as module

    skrl.ppo_clip_loss(torch.zeros(2), torch.zeros(2), torch.ones(2), 0.2)
    assert module.compute_gae is skrl.compute_gae


def _update_run(kind="categorical", n=9, config=None):
    from rlspec.checks.clauses.ppo import BASE_CONFIG, UpdateCase

    config = {**BASE_CONFIG, "epochs": 2, "minibatch_size": 4, **(config or {})}
    arguments = UpdateCase(kind, n=n, seed=5).arguments("float64", config=config)
    assert skrl.ppo_update(**arguments) is None  # skrl's update returns nothing: the suite records it
    return arguments["optimizer"]


def test_ppo_update_steps_the_suites_optimizer_in_balanced_minibatches():
    """PPO.update() with mini_batches = ceil(9 / 4) = 3: np.array_split of one randperm per epoch, sizes 3, 3, 3
    (not 4, 4, 1), every sample once per epoch, a fresh order each epoch."""
    optimizer = _update_run()
    recording = optimizer.recording
    rows = [recording.step_rows(k).tolist() for k in range(optimizer.steps)]
    assert optimizer.steps == 6 and [len(r) for r in rows] == [3] * 6
    assert sorted(sum(rows[:3], [])) == sorted(sum(rows[3:], [])) == list(range(9))
    assert sum(rows[:3], []) != sum(rows[3:], [])
    assert all(step.zero_grads == 1 for step in recording.steps)  # optimizer.zero_grad() before each backward


def test_ppo_update_puts_compute_gae_back_and_the_module_in_its_mode():
    from skrl.agents.torch.ppo import ppo as module

    before = module.compute_gae
    optimizer = _update_run("gaussian", n=6, config={"value_clip_eps": 0.2, "target_kl": 0.01})
    assert module.compute_gae is before and optimizer.steps >= 1


def test_log_std_is_clamped_by_default():
    """GaussianMixin(clip_log_std=True), skrl's default: a log-std of 3 is scored as 2 (skrl.xfail)."""
    entropy = lambda log_std: 0.5 * np.log(2 * np.pi * np.e) + log_std
    assert skrl.diag_gaussian_entropy(torch.tensor([[3.0]])).item() == pytest.approx(entropy(2.0), abs=1e-6)
    assert skrl.unclamped_log_std.diag_gaussian_entropy(torch.tensor([[3.0]])).item() == pytest.approx(entropy(3.0), abs=1e-6)


def test_no_squashed_gaussian():
    """skrl's torch models have no tanh-squashed Gaussian: the operation is not provided."""
    assert not hasattr(skrl, "tanh_gaussian_log_prob")


def test_trpo_conjugate_gradient_and_step_p9():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(6, 6))
    F, g = m @ m.T + np.eye(6), rng.normal(size=6)
    x = skrl.conjugate_gradient(lambda v: F @ v, g, 10, 1e-10)
    assert np.linalg.norm(F @ x - g) < 1e-8 * np.linalg.norm(g)
    step = skrl.natural_step(g, lambda v: F @ v, 0.01, 10)
    damped = F + 0.1 * np.eye(6)  # the damping is inside skrl's step normalisation, as in sb3-contrib
    assert 0.5 * step @ damped @ step == pytest.approx(0.01, rel=1e-9)


def test_trpo_line_search_halves_and_needs_a_strict_kl():
    """A linear surrogate gains exactly its prediction (ratio 1): only the KL decides."""
    x0, full = np.zeros(2), np.array([1.0, 1.0])
    improving = lambda x: float(x.sum())  # slope along fullstep: 2
    search = lambda surrogate, kl, max_kl, backtracks: skrl.line_search(surrogate, kl, x0, full, max_kl, backtracks,
                                                                        expected_improve_rate=2.0)
    assert search(improving, lambda x: 0.5 * float(x @ x), 0.05, 10) == pytest.approx([0.125, 0.125])
    at_the_bound = lambda x: 1.0 if x[0] > 0.9 else 0.0
    assert search(improving, at_the_bound, 1.0, 10) == pytest.approx([0.5, 0.5])
    assert search(lambda x: -float(x.sum()), at_the_bound, 10.0, 4).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="expected_improve_rate"):
        skrl.line_search(improving, at_the_bound, x0, full, 1.0, 10)


def test_trpo_line_search_compounds_the_expected_improvement():
    """docs/bugs-found.md (skrl-trpo-compounded-prediction). surrogate(x) = x - 2.5 x^2 along fullstep = 1
    (prediction t at trial t): the gain over the prediction is 1 - 2.5 t = -1.5, -0.25, 0.375, 0.6875 at
    t = 1 .. 1/8, so accept_ratio 0.5 accepts t = 1/8. skrl divides the third trial's gain by
    (1 x 0.5 x 0.25) g'f instead of 0.25 g'f: ratio 0.75, accepted at t = 1/4."""
    surrogate = lambda x: float(x[0] - 2.5 * x[0] ** 2)
    x = skrl.line_search(surrogate, lambda x: 0.0, np.zeros(1), np.ones(1), 10.0, 10, expected_improve_rate=1.0)
    assert x.tolist() == pytest.approx([0.25])  # the sufficient-increase rule: [0.125]


def test_trpo_update_is_for_gaussian_policies_only():
    """On a Gaussian policy update() matches the TRPO rule on standardised advantages (damping 0.1,
    backtracking 0.5; the first trial is accepted, so the accept-ratio test does not change the
    answer); a categorical policy fails inside skrl (KeyError 'mean_actions')."""
    from rlspec.reference import trpo as ref

    rng = np.random.default_rng(0)
    features = rng.normal(size=(6, 3))
    gaussian = ref.linear_diag_gaussian(features, 2)
    params = torch.tensor(rng.normal(size=gaussian.n_params) * 0.1)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(0)
        actions = gaussian(params).sample()
    advantages, v = torch.tensor(rng.normal(size=6)), torch.tensor(rng.normal(size=gaussian.n_params))
    assert torch.allclose(skrl.fisher_vector_product(gaussian, params, v),
                          ref.fisher_vector_product(gaussian, params, v, damping=0.1), atol=1e-12)
    standardised = (advantages - advantages.mean()) / advantages.std()  # compute_gae's, up to its + 1e-8
    expected = ref.trpo_update(gaussian, params, actions, standardised, 0.01, 10, 10, damping=0.1)
    assert torch.allclose(skrl.trpo_update(gaussian, params, actions, advantages, 0.01, 10, 10).double(), expected, atol=1e-6)
    categorical = ref.linear_categorical(features, 3)
    theta = torch.zeros(categorical.n_params, dtype=torch.float64)
    with pytest.raises(KeyError, match="mean_actions"):
        skrl.trpo_update(categorical, theta, torch.zeros(6, dtype=torch.long), advantages, 0.01, 10, 10)


# ---------------------------------------------------------------------------------------------
# off-policy: DDPG, TD3 and SAC through update() (the numbers the adapter's docstring quotes)


def _suite_case(**changes):
    from dataclasses import replace

    from rlspec.checks.clauses import offpolicy

    case = replace(offpolicy.KNOWN, **changes)
    module = lambda role: offpolicy.MODULES[offpolicy.kind_of(role)](case.nets[role], torch.float64)
    batch = {k: (torch.tensor(v) if k not in ("terminated", "truncated") else torch.tensor(v, dtype=torch.bool))
             for k, v in case.batch().items()}
    return case, module, batch


def test_offpolicy_targets_bootstrap_truncated_rows():
    """record_transition stores `terminated` and drops `truncated`; the targets mask `terminated` alone, so a
    truncated row bootstraps (unlike compute_gae's default, docs/bugs-found.md #1): r = (1, 1, 0.5, -2),
    Q' = (10, 10, -4, 3), terminated (F, F, F, T), truncated (T, F, T, T), gamma 0.9: (10, 10, -3.1, -2)."""
    y = skrl.td_target(np.array([1.0, 1.0, 0.5, -2.0]), np.array([10.0, 10.0, -4.0, 3.0]),
                       np.array([False, False, False, True]), np.array([True, False, True, True]), 0.9)
    assert y.dtype == np.float32 and y.tolist() == pytest.approx([10.0, 10.0, -3.1, -2.0], abs=1e-6)


def test_sac_soft_target_worked_by_hand():
    """The chapter's hand-worked case (min Q' = 2, log pi = -1, alpha 0.1, gamma 0.5): 2.05."""
    from rlspec.checks.clauses import offpolicy

    case = offpolicy.HAND_SAC
    net = lambda role: offpolicy.MODULES[offpolicy.kind_of(role)](case.nets[role], torch.float64)
    t = lambda x: torch.tensor(x)
    y = skrl.sac_critic_target(net("policy"), net("critic1"), net("critic2"), net("target_critic1"), net("target_critic2"),
                               t(case.obs), t(case.actions), t(case.rewards), t(case.next_obs), t(case.terminated),
                               t(case.truncated), case.gamma, case.alpha, t(case.noise))
    assert y.item() == pytest.approx(2.05, abs=1e-6)


def test_td3_target_smoothing_is_skrls_once_configured():
    """TD3_CFG's default smooth_regularization_noise is None (no target-policy smoothing); with the suite's noise
    delivered through skrl's Noise interface, update() clips it to smooth_regularization_clip and the action to
    the space's bounds: the known batch's target matches the clause's value."""
    from skrl.agents.torch.td3 import TD3_CFG

    from rlspec.checks.clauses import offpolicy

    assert TD3_CFG().smooth_regularization_noise is None
    case, net, batch = _suite_case(noise=offpolicy.TD3_KNOWN_NOISE)
    roles = ("actor", "critic1", "critic2", "target_actor", "target_critic1", "target_critic2")
    y = skrl.td3_critic_target(*(net(r) for r in roles), **batch, gamma=case.gamma, noise=torch.tensor(case.noise),
                               noise_clip=case.noise_clip, low=torch.tensor(case.low), high=torch.tensor(case.high))
    expected, _, _ = offpolicy.td3_expected(case, 2**-24, "double-q")
    assert y.double().numpy() == pytest.approx(expected, abs=1e-5)


def test_actor_losses_reach_the_critics():
    """actor_loss_critic_gradient = "discarded": DDPG's and SAC's actor losses send gradient into the critics
    (skrl clears it before the critics' own step); the actor's gradient is the deterministic policy gradient."""
    from rlspec.checks.clauses import offpolicy

    case, net, _ = _suite_case(noise=offpolicy.SAC_KNOWN_NOISE)
    actor, critic = net("actor"), net("critic")
    loss = skrl.dpg_actor_loss(actor, critic, torch.tensor(case.obs))
    expected, _, grads, _ = offpolicy.dpg_expected(case, 2**-24)
    assert loss.item() == pytest.approx(expected, abs=1e-5)
    assert torch.autograd.grad(loss, actor.weight, retain_graph=True)[0].numpy() == pytest.approx(grads["weight"], abs=1e-5)
    assert torch.autograd.grad(loss, critic.c)[0].item() == pytest.approx(-1.0)  # d(-mean Q)/dc
    policy, critic1, critic2 = net("policy"), net("critic1"), net("critic2")
    loss = skrl.sac_actor_loss(policy, critic1, critic2, torch.tensor(case.obs), case.alpha, torch.tensor(case.noise))
    reached = [torch.autograd.grad(loss, c.c, retain_graph=True)[0].item() for c in (critic1, critic2)]
    assert sum(reached) == pytest.approx(-1.0) and all(r <= 0 for r in reached)  # d/dc of -mean min(Q1, Q2)


def test_temperature_loss_known_answers():
    """-(log_alpha (log_prob + H).detach()).mean(): log_alpha = log 0.5, log_prob (-1, 0.5), H = -1: loss
    -0.8664340, d/d log_alpha 1.25, nothing into log_prob; target_entropy None and action_dim 3: 3.25."""
    log_alpha = torch.tensor(np.log(0.5), requires_grad=True)
    log_prob = torch.tensor([-1.0, 0.5], requires_grad=True)
    loss = skrl.sac_alpha_loss(log_alpha, log_prob, 2, -1.0)
    g_alpha, g_logp = torch.autograd.grad(loss, [log_alpha, log_prob])
    assert loss.item() == pytest.approx(-0.8664340, abs=1e-6)
    assert g_alpha.item() == pytest.approx(1.25, abs=1e-6) and g_logp.tolist() == [0.0, 0.0]
    loss = skrl.sac_alpha_loss(log_alpha, log_prob, 3)
    assert torch.autograd.grad(loss, log_alpha)[0].item() == pytest.approx(3.25, abs=1e-6)


def test_polyak_and_td3_schedules():
    """update_parameters(polyak=0.25): (0.75, 2.5, -2). TD3 counts gradient steps across update() calls and
    updates on steps policy_delay, 2 policy_delay, ... (update_phase "end"), the targets with the actor."""
    assert skrl.polyak_update(np.array([1.0, 2.0, -3.0]), np.array([0.0, 4.0, 1.0]), 0.25).tolist() == [0.75, 2.5, -2.0]
    actor, targets = skrl.td3_actor_update_steps((3, 1, 2), 2)
    assert actor.tolist() == [0, 1, 0, 1, 0, 1] and targets.tolist() == actor.tolist()
    history = skrl.target_network_updates(np.zeros(2), np.eye(2)[[0, 1, 0, 1, 0, 1]] * 4.0, 1.0, 3, (1,) * 6)
    assert history.tolist() == [[0, 0], [0, 0], [4, 0], [4, 0], [4, 0], [0, 4]]  # hard copies on steps 3 and 6


def test_td3_and_dqn_paths_agree_with_the_main_column():
    """The candidates skrl:td3 (TD3's actor loss) and skrl:dqn (DQN's target_update_interval), not yet matrix
    columns, give the same answers as DDPG's actor loss and TD3's target schedule."""
    case, net, _ = _suite_case()
    obs = torch.tensor(case.obs)
    assert skrl.td3.dpg_actor_loss(net("actor"), net("critic"), obs).item() == skrl.dpg_actor_loss(net("actor"), net("critic"), obs).item()
    online = np.arange(12.0).reshape(6, 2)
    assert np.array_equal(skrl.dqn.target_network_updates(np.zeros(2), online, 0.5, 2, (3, 1, 2)),
                          skrl.target_network_updates(np.zeros(2), online, 0.5, 2, (3, 1, 2)))


def test_offpolicy_calls_leave_skrl_as_they_found_it():
    """The F proxy is removed after update(), skrl's logger level and torch's RNG are put back."""
    import skrl as library
    from skrl.agents.torch.ddpg import ddpg as module

    level, state = library.logger.level, torch.random.get_rng_state()
    skrl.td_target(np.ones(2), np.ones(2), np.zeros(2, bool), np.zeros(2, bool), 0.9)
    assert module.F is torch.nn.functional and library.logger.level == level
    assert torch.equal(torch.random.get_rng_state(), state)


def test_no_offline_algorithms():
    """skrl 2.1.1 has no CQL, IQL or AWR: the offline chapter is not provided."""
    import pkgutil

    import skrl.agents.torch as agents

    assert not {"cql", "iql", "awr", "bcq", "td3_bc"} & {m.name for m in pkgutil.iter_modules(agents.__path__)}
    assert not any(hasattr(skrl, op) for op in ("cql_penalty", "cql_sampled_penalty", "expectile_loss", "iql_targets", "awr_loss"))


# ---------------------------------------------------------------------------------------------
# normalisation (spec/clauses/35_normalisation.toml): RunningStandardScaler


def test_running_standard_scaler_merges_the_unbiased_batch_variance():
    """Two batches [1, 3] and [5, 7] after an almost empty prior: variance 6, where the four values' is 5
    (docs/bugs-found.md 28); a batch of one sample makes the running variance NaN."""
    from skrl.resources.preprocessors.torch import RunningStandardScaler

    scaler = RunningStandardScaler(1, device="cpu")
    scaler.current_count.fill_(1e-12)
    scaler(torch.tensor([[1.0], [3.0]]), train=True)
    scaler(torch.tensor([[5.0], [7.0]]), train=True)
    assert scaler.running_mean.item() == pytest.approx(4.0) and scaler.running_variance.item() == pytest.approx(6.0)
    one = RunningStandardScaler(1, device="cpu")
    one(torch.tensor([[2.0]]), train=True)
    assert torch.isnan(one.running_variance).all()


def test_running_standard_scaler_merge_is_chans():
    mean, var, count = skrl.merge_moments(np.array([1.0]), np.array([2.0]), 3.0, np.array([4.0]), np.array([1.0]), 1.0)
    assert (float(mean[0]), float(var[0]), float(count)) == (1.75, 3.4375, 4.0)

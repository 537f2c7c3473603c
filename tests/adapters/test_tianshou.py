"""The ``tianshou`` adapter against Tianshou 2.0.1: its verdicts (tests/adapters/expected/tianshou.toml,
for the defaults and the variants) and the library facts behind them.

Skipped when tianshou is not installed, unless RLSPEC_REQUIRE_ADAPTERS=1 (.ci/adapters), where a
missing library is an error.
"""

import os

import numpy as np
import pytest

if os.environ.get("RLSPEC_REQUIRE_ADAPTERS"):
    import tianshou  # noqa: F401 - .ci/adapters: the library must be there
else:
    pytest.importorskip("tianshou")

import torch  # noqa: E402
from _verdicts import verdict_tests  # noqa: E402

from rlspec.checks import load, run_conformance# noqa: E402
from rlspec.checks.adapters import tianshou as adapter  # noqa: E402

test_verdict, test_unlisted_clauses, test_table_names_every_candidate = verdict_tests("tianshou")


def test_version_is_the_one_the_adapter_was_written_against():
    assert adapter.RLSPEC_VERSION == "tianshou 2.0.1", adapter.RLSPEC_VERSION


def test_loads_by_bare_name_with_its_declarations():
    candidate = load("tianshou")
    assert candidate.precision == "float32" and candidate.conventions["advantage_normalization"] == "minibatch"
    assert candidate.conventions["trpo_advantage_normalization"] == "batch"
    assert load("tianshou:dual_clip").conventions["dual_clip"] == 3.0


def test_dual_clip_undeclared_is_caught():
    """The dual clip judged as if undeclared: A = -2, r = 10 has gradient 0 instead of +20."""
    undeclared = load("tianshou:dual_clip")
    undeclared.conventions = {**undeclared.conventions, "dual_clip": None}
    run = run_conformance(undeclared, clauses="PPO-DUAL-CLIP", profile="quick", seed=0)
    assert run["PPO-DUAL-CLIP"].status == "fail"


def test_one_sample_minibatch_update_is_nan_and_the_error_says_why():
    """PPO normalises each minibatch with (A - mean) / (std + 1e-8): one sample has std NaN, the step is
    NaN, and the next minibatch's Categorical raises; minibatches of four are fine."""
    from rlspec.checks.clauses.ppo import BASE_CONFIG, UpdateCase

    arguments = UpdateCase("categorical", n=2, seed=1).arguments("float64", config={**BASE_CONFIG, "minibatch_size": 1})
    with pytest.raises(ValueError, match="one-sample minibatch.*invalid values"):
        adapter.ppo_update(**arguments)
    arguments = UpdateCase("categorical", n=8, seed=1).arguments("float64", config={**BASE_CONFIG, "minibatch_size": 4})
    adapter.ppo_update(**arguments)
    assert all(torch.isfinite(p).all() for p in arguments["policy"].parameters())


def test_npg_and_trpo_standardise_without_an_epsilon():
    """NPG._preprocess_batch: (A - mean) / std with no epsilon. Constant advantages are 0/0 = NaN, and
    TRPO's line search then evaluates NaN parameters."""
    from rlspec.reference import trpo as ref

    policy = ref.linear_categorical(np.array([[1.0, 0.5], [-0.5, 1.0], [0.25, -1.0]]), 3)
    theta = torch.tensor([0.3, -0.2, 0.5, 0.1], dtype=torch.float64)
    actions = torch.tensor([0, 2, 1])
    with pytest.raises(ValueError, match="constant advantages"):
        adapter.trpo_update(policy, theta, actions, torch.full((3,), 0.75, dtype=torch.float64), 0.01, 10, 10)
    moved = adapter.trpo_update(policy, theta, actions, torch.tensor([1.0, -0.5, 0.75], dtype=torch.float64), 0.01, 10, 10)
    assert torch.all(torch.isfinite(moved)) and not torch.equal(moved, theta)


def test_sac_squashing_correction_is_the_epsilon_form():
    """correct_log_prob_gaussian_tanh subtracts log(1 - tanh(u)^2 + float32 eps): -35.04 at u = 10,
    where the exact log-density is -32.31 (docs/bugs-found.md)."""
    import math

    u = torch.tensor([[1.0], [10.0]], dtype=torch.float64)
    got = adapter.tanh_gaussian_log_prob(torch.zeros_like(u), torch.zeros_like(u), u)
    exact = [-0.5 * math.log(2 * math.pi) - x * x / 2 - 2 * (math.log(2) - x - math.log1p(math.exp(-2 * x))) for x in (1.0, 10.0)]
    assert got[0].item() == pytest.approx(exact[0], abs=1e-6)
    assert got[1].item() == pytest.approx(-35.04, abs=0.01) and exact[1] == pytest.approx(-32.31, abs=0.01)


# ---------------------------------------------------------------------------------------------
# the facts behind the verdicts, on the GAE known answers

P1 = dict(rewards=np.ones(4), values=np.full(4, 0.5), next_values=np.array([0.5, 0.5, 0.5, 2.0]),
          terminated=np.array([False, True, False, False]), truncated=np.zeros(4, bool), gamma=0.5, lam=0.5)
P2 = {**P1, "next_values": np.array([0.5, 3.0, 0.5, 2.0]), "terminated": np.zeros(4, bool),
      "truncated": np.array([False, True, False, False])}


def test_gae_known_answers_through_the_buffer():
    assert adapter.gae(**P1)[0].tolist() == [0.875, 0.5, 1.125, 1.5]
    assert adapter.gae(**P2)[0].tolist() == [1.25, 2.0, 1.125, 1.5]
    both = {k: np.stack([P1[k], P2[k]], axis=1) if isinstance(P1[k], np.ndarray) else P1[k] for k in P1}
    advantages, returns = adapter.gae(**both)  # a VectorReplayBuffer with two sub-buffers
    assert advantages.T.tolist() == [[0.875, 0.5, 1.125, 1.5], [1.25, 2.0, 1.125, 1.5]]
    assert returns[:, 1].tolist() == [1.75, 2.5, 1.625, 2.0]


def test_default_v_s_rolls_the_next_values():
    """compute_episodic_return's v_s=None default is np.roll of the masked v_s_: wrong at episode
    starts (bug B8: [-0.625, 0.5, 1.625, 1.5] on P1); the adapter always passes v_s."""
    from tianshou.algorithm.algorithm_base import Algorithm

    buffer, batch, indices = adapter._fill(P1["rewards"][:, None], P1["terminated"][:, None], P1["truncated"][:, None])
    _, advantages = Algorithm.compute_episodic_return(batch, buffer, indices, v_s_=P1["next_values"], gamma=0.5, gae_lambda=0.5)
    assert advantages.tolist() == [-0.625, 0.5, 1.625, 1.5]


def test_monte_carlo_return_without_bootstrap():
    assert adapter.rewards_to_go(np.array([1.0, 2.0, 3.0]), 0.5).tolist() == [2.75, 3.5, 3.0]


def test_clip_gradient_table_p5():
    for A, r, expected in [(2, 0.5, -1.0), (2, 1.0, -2.0), (2, 1.5, 0.0), (-2, 0.5, 0.0), (-2, 1.0, 2.0), (-2, 1.5, 3.0)]:
        logp_new = torch.tensor([0.0], dtype=torch.float64, requires_grad=True)
        logp_old = torch.tensor([-np.log(r)], dtype=torch.float64)
        loss = adapter.ppo_clip_loss(logp_new, logp_old, torch.tensor([float(A)], dtype=torch.float64), 0.2)
        (grad,) = torch.autograd.grad(loss, logp_new)
        assert grad.item() == pytest.approx(expected, abs=1e-6), (A, r)


def test_dual_clip_p5():
    """dual_clip = 3: A = -2, r = 5 -> loss 6, gradient 0."""
    logp_new = torch.tensor([np.log(5.0)], dtype=torch.float64, requires_grad=True)
    loss = adapter.dual_clip.ppo_clip_loss(logp_new, torch.zeros(1, dtype=torch.float64),
                                           torch.tensor([-2.0], dtype=torch.float64), 0.2)
    assert loss.item() == pytest.approx(6.0) and torch.autograd.grad(loss, logp_new)[0].item() == 0.0


def test_ratio_is_float32_value_loss_and_normalisation_p6_p8_p10():
    logp_new = torch.tensor([-1000.0], dtype=torch.float64, requires_grad=True)
    loss = adapter.ppo_clip_loss(logp_new, torch.tensor([-1000.1], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64), 0.5)
    assert loss.item() == -float(np.float32(np.exp(0.1)))  # the ratio goes through .float()
    V = torch.tensor([0.0, 0.0], dtype=torch.float64, requires_grad=True)
    R, V_old = torch.tensor([0.5, 3.0], dtype=torch.float64), torch.tensor([0.3, -1.0], dtype=torch.float64)
    assert adapter.ppo_value_loss(V, R).item() == pytest.approx(4.625)  # no 0.5 on the value loss
    assert adapter.ppo_value_loss(V, R, V_old, 0.2).item() == pytest.approx(7.345)
    assert adapter.normalize_advantages(np.array([1.0, 2.0, 3.0, 4.0])).tolist() == pytest.approx(
        [-1.161895, -0.387298, 0.387298, 1.161895], abs=1e-6)
    assert adapter.normalize_advantages(np.array([0.0, 1e-7])).tolist() == pytest.approx([-0.619497, 0.619497], abs=1e-6)
    assert np.isnan(adapter.normalize_advantages(np.array([3.0]))).all()


def test_trpo_facts():
    """Tianshou's MVP adds 0.1 v; its step is scaled with the damped matrix, so 1/2 dW' F dW < max_kl; CG stops on r'r < residual_tol."""
    from rlspec.reference import trpo as ref

    features = np.array([[1.0, 0.5], [0.2, -1.0], [0.3, 0.3]])
    policy = ref.linear_diag_gaussian(features, 1)  # theta = (w1, w2, log_std): the mean is linear
    theta = torch.zeros(3, dtype=torch.float64)
    F = torch.stack([adapter.fisher_vector_product(policy, theta, e) for e in torch.eye(3, dtype=torch.float64)])
    F_undamped = F - 0.1 * torch.eye(3, dtype=torch.float64)
    X = torch.as_tensor(features)
    assert torch.allclose(F_undamped[:2, :2], X.T @ X / 3, atol=1e-12)  # unit std: F = X'X / B for the mean
    actions = torch.tensor([[0.3], [-0.2], [0.5]], dtype=torch.float64)
    # the advantages are standardised first; the step's size is set by max_kl whatever their scale
    new = adapter.trpo_update(policy, theta, actions, torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64), 0.01, 10, 10)
    step = new - theta
    assert float(0.5 * step @ F @ step) == pytest.approx(0.01, rel=1e-5)  # the damped quadratic meets max_kl
    assert float(0.5 * step @ F_undamped @ step) < 0.01
    A = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    x = adapter.conjugate_gradient(lambda v: A @ v, torch.tensor([1.0, 2.0], dtype=torch.float64), 2, 1e-20)
    assert torch.allclose(A @ x, torch.tensor([1.0, 2.0], dtype=torch.float64), atol=1e-12)


def test_npg_step_is_half_the_damped_natural_direction():
    F = np.diag([1.0, 100.0])
    g = np.array([1.0, 1.0])
    step = adapter.npg.natural_step(g, lambda v: F @ np.asarray(v), 0.01, 20)
    assert step == pytest.approx(0.5 * np.linalg.solve(F + 0.1 * np.eye(2), g), rel=1e-6)


# ---------------------------------------------------------------------------------------------
# off-policy (DDPG, TD3, SAC) and offline (DiscreteCQL, CQL, DiscreteCRR): the numbers the adapter's
# docstring and docs/bugs-found.md (entries 22-20) quote


def _networks(op, case):
    from rlspec.checks.clauses import offpolicy as op_checks

    return {role: op_checks.MODULES[op_checks.kind_of(role)](case.nets[role]) for role in op_checks.ROLES[op]}


def test_td3_target_action_is_not_clipped_to_the_bounds():
    """bugs-found 22: row 0 of the known batch is 0.4089 (the target action left unclipped), not 0.6175; with
    bounds far away it is the clause's number, and noise_clip = 0 adds the noise unclipped (the documented
    sentinel, tianshou.xfail)."""
    from rlspec.checks.clauses import offpolicy as op_checks

    def target(case):
        batch = {k: torch.as_tensor(v) for k, v in case.batch().items()}
        return adapter.td3_critic_target(**_networks("td3_critic_target", case), **batch, gamma=case.gamma,
                                         noise=torch.as_tensor(case.noise), noise_clip=case.noise_clip,
                                         low=torch.as_tensor(case.low), high=torch.as_tensor(case.high)).numpy()

    case = op_checks.td3_case()
    expected, _, _ = op_checks.td3_expected(case, 1e-16, "bounds")
    got = target(case)
    assert got[0] == pytest.approx(0.4089344461, abs=1e-9) and expected[0] == pytest.approx(0.6175, abs=1e-12)
    unclipped = op_checks.bootstrap(case, op_checks.td3_value(case, op_checks.smoothed(
        op_checks.actor_np(case.nets["target_actor"], case.next_obs), case.noise, case.noise_clip, case.low, case.high,
        clip_action=False)))
    assert got == pytest.approx(unclipped, abs=1e-12)
    wide = op_checks.td3_case(low=np.array([-3.0, -3.0]), high=np.array([3.0, 3.0]))
    assert target(wide) == pytest.approx(op_checks.td3_expected(wide, 1e-16, "noise")[0], abs=1e-12)
    no_clip = op_checks.td3_case(low=np.array([-3.0, -3.0]), high=np.array([3.0, 3.0]), noise_clip=0.0)
    raw_noise = op_checks.bootstrap(no_clip, op_checks.td3_value(no_clip, op_checks.actor_np(
        no_clip.nets["target_actor"], no_clip.next_obs) + no_clip.noise))
    assert target(no_clip) == pytest.approx(raw_noise, abs=1e-12)


def test_td3_updates_on_the_first_step_of_each_period_counting_across_calls():
    actor, targets = adapter.td3_actor_update_steps((1,) * 6, 2)
    assert actor.tolist() == targets.tolist() == [1, 0, 1, 0, 1, 0]
    assert adapter.td3_actor_update_steps((3, 1, 2), 3)[0].tolist() == [1, 0, 0, 1, 0, 0]
    online = np.eye(4)[1:]
    history = adapter.target_network_updates(np.eye(4)[0], online, 0.5, 1, (3,))
    assert history.dtype == np.float32 and history[-1].tolist() == [0.125, 0.125, 0.25, 0.5]
    assert adapter.polyak_update(np.array([1.0, 2.0, -3.0]), np.array([0.0, 4.0, 1.0]), 0.25).tolist() == [0.75, 2.5, -2.0]


def test_sac_temperature_loss_and_its_default_target_entropy():
    """AutoAlpha.update's loss in log_alpha, through SAC._update_with_batch: gradient 1.25 for H = -1; the
    high-level default target entropy is -dim(A) (3.25 for dim 3); no gradient reaches log_prob."""
    import math

    for action_dim, target_entropy, gradient in ((2, -1.0, 1.25), (3, None, 3.25)):
        log_alpha = torch.tensor(math.log(0.5), dtype=torch.float64, requires_grad=True)
        log_prob = torch.tensor([-1.0, 0.5], dtype=torch.float64, requires_grad=True)
        loss = adapter.sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy)
        g_alpha, g_logp = torch.autograd.grad(loss, [log_alpha, log_prob], allow_unused=True)
        assert g_alpha.item() == pytest.approx(gradient, abs=1e-12) and g_logp is None
        assert type(loss) is torch.Tensor


def test_cql_discrete_penalty_is_discrete_cql_and_crrs_regulariser():
    q = torch.tensor([[1.0, 2.0, 3.0], [1000.0, 1000.0, 0.0]], dtype=torch.float64, requires_grad=True)
    actions = torch.tensor([0, 1])
    expected = [0.5 * (np.log(np.exp(1) + np.exp(2) + np.exp(3)) - 1), 0.5 * np.log(2)]
    for penalty in (adapter.cql_penalty, adapter.crr_regulariser.cql_penalty):
        got = penalty(q, actions, 0.5)
        assert got.tolist() == pytest.approx(expected, abs=1e-12)
        (grad,) = torch.autograd.grad(got[0], q)
        soft = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
        assert grad[0].tolist() == pytest.approx((0.5 * (soft - [1, 0, 0])).tolist(), abs=1e-12)


def _sampled(q_uniform, q_policy, log_pi, q_data, low, high, alpha=1.0, temperature=1.0):
    t = lambda x: torch.as_tensor(np.asarray(x, dtype=float))
    return adapter.cql_sampled_penalty(t(q_uniform), t(q_policy), t(log_pi), t(q_data), t(low), t(high), alpha, temperature)


def test_cql_groups_its_samples_in_threes():
    """bugs-found 23: the contract's known answer (two uniform, two policy samples on [-1, 1]^2, every term
    1 + log 4) is log 4 + 1 + log 4 - 1 = 2.7726 summed over the four; Tianshou averages two pairs: 2.0794."""
    import math

    got = _sampled([[1.0, 1.0]], [[1.0, 1.0]], [[-math.log(4)] * 2], [1.0], [-1.0, -1.0], [1.0, 1.0])
    assert got.item() == pytest.approx(math.log(8), abs=1e-6) and math.log(16) == pytest.approx(2.7725887, abs=1e-7)
    # the first CQL-SAMPLED-UNIFORM-DENSITY case: three uniform and two policy samples, Q = 1.5 on [-1, 1]
    got = _sampled(np.full((1, 3), 1.5), np.full((1, 2), 1.5), np.full((1, 2), -math.log(2)), [0.0], [-1.0], [1.0])
    assert got.item() == pytest.approx(2.6552453, abs=1e-6) and 1.5 + math.log(2) + math.log(5) == pytest.approx(3.8025851, abs=1e-7)


def test_cql_with_its_reshape_assigned_gives_the_declared_estimator():
    """The same CQL._update_with_batch with the discarded `value.reshape(...)` assigned (the one change): the
    adapter's slots then give the sum-normalised, density-inside estimator of the contract's known answers (the
    second one: 3.1069551235115144), so the failures of entry 23 are that line's."""
    import inspect
    import textwrap

    import tianshou.algorithm.imitation.cql as cql_module
    from rlspec.checks.clauses import offline as off

    source = textwrap.dedent(inspect.getsource(cql_module.CQL._update_with_batch))
    names = "current_pi_value1, current_pi_value2, next_pi_value1, next_pi_value2, random_value1, random_value2"
    fixed = source.replace("    value.reshape(batch_size, self.num_repeat_actions, 1)", "    pass").replace(
        "# cat q values", f"{names} = (v.reshape(batch_size, self.num_repeat_actions, 1) for v in ({names}))")
    assert fixed.count("pass") == source.count("pass") + 1 and fixed != source
    namespace = dict(vars(cql_module))
    exec(fixed, namespace)
    original = adapter.CQL
    adapter.CQL = type("FixedCQL", (cql_module.CQL,), {"_update_with_batch": namespace["_update_with_batch"]})
    try:
        declared = off.Estimator("sum", "density-inside")
        for s in off.SAMPLED_KNOWN + [off.Sampled(np.array([[0.3, -1.0, 2.0]]), np.array([[1.0, 0.5]]), np.array([[-0.7, 0.2]]),
                                                  np.array([0.4]), np.array([-1.0, -1.0]), np.array([1.0, 1.0]), 2.0, 1.0)]:
            got = _sampled(s.q_uniform, s.q_policy, s.log_pi, s.q_data, s.low, s.high, s.alpha, s.temperature)
            assert got.tolist() == pytest.approx(off.sampled_oracle(s, declared).tolist(), rel=1e-6)
    finally:
        adapter.CQL = original
    assert off.sampled_oracle(off.SAMPLED_KNOWN[0], off.Estimator("sum", "density-inside"))[1] == pytest.approx(3.1069551235115144)


def test_cql_uniform_density_is_the_unit_boxs_and_its_draws_a_point_mass():
    """bugs-found 24: one uniform sample of Q = 0 on [-2, 2] (the policy's negligible) weighs exp(0 + log 2), the
    [-1, 1] density, not exp(log 4); CQL's own draw uniform_(-min_action, max_action) is 1.0 everywhere."""
    import math

    import gymnasium as gym
    from tianshou.algorithm import CQL
    from tianshou.algorithm.modelfree.sac import SACPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Batch
    from tianshou.utils.net.common import Net
    from tianshou.utils.net.continuous import ContinuousActorProbabilistic, ContinuousCritic

    got = _sampled([[0.0]], [[-1000.0]], [[0.0]], [0.0], [-2.0], [2.0])
    assert got.item() == pytest.approx(math.log(2), abs=1e-6)  # the box's weight: log 4 = 1.3863
    scored = []

    class Critic(ContinuousCritic):
        def forward(self, obs, act=None, info=None):
            scored.append(torch.as_tensor(act).detach().clone())
            return super().forward(obs, act, info)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        actor = ContinuousActorProbabilistic(preprocess_net=Net(state_shape=3, hidden_sizes=[8]), action_shape=2, unbounded=True)
        critic = Critic(preprocess_net=Net(state_shape=3, action_shape=2, hidden_sizes=[8], concat=True))
        cql = CQL(policy=SACPolicy(actor=actor, action_space=gym.spaces.Box(-1.0, 1.0, (2,))), policy_optim=AdamOptimizerFactory(),
                  critic=critic, critic_optim=AdamOptimizerFactory(), calibrated=False, num_repeat_actions=5)
        cql._update_with_batch(Batch(obs=np.ones((2, 3)), act=np.zeros((2, 2)), rew=np.zeros(2), obs_next=np.ones((2, 3)),
                                     done=np.zeros(2, bool), info=Batch()))
    assert sum(len(a) == 10 and bool((a == 1.0).all()) for a in scored) == 2  # both critics' "uniform" calls


def test_crr_weight_is_not_detached():
    """bugs-found 25, one state at a time (no broadcast): beta = 3, A = 0.5, log pi = -1: w = exp(1/6) and d loss / d A
    = w / 3 = 0.3938; at A / beta = 1000 the loss is 20 (the clip) and d loss / d A is NaN (0 * inf through the
    overflowed exp)."""
    import math

    for a, value, grad in ((0.5, math.exp(0.5 / 3), 0.3937868), (3000.0, 20.0, math.nan)):
        log_prob = torch.tensor([-1.0], dtype=torch.float64, requires_grad=True)
        advantages = torch.tensor([a], dtype=torch.float64, requires_grad=True)
        loss = adapter.awr_loss(log_prob, advantages, 3.0)
        assert loss.item() == pytest.approx(value, abs=1e-12)
        g_logp, g_adv = torch.autograd.grad(loss.sum(), [log_prob, advantages])
        assert g_logp.item() == pytest.approx(-value, abs=1e-12)
        assert math.isnan(g_adv.item()) if math.isnan(grad) else g_adv.item() == pytest.approx(grad, abs=1e-7)


def test_crr_weights_every_sample_by_the_batch_mean_weight():
    """bugs-found 26: on a batch, (N,) log-probabilities times (N, 1) weights broadcast: each sample's loss (read back
    as B dL/ds_b) is -log pi_b times the mean weight, not its own."""
    import math

    log_prob = torch.tensor([-1.0, -2.0], dtype=torch.float64)
    advantages = torch.tensor([0.5, -1.0], dtype=torch.float64)
    mean_weight = (math.exp(0.5 / 3) + math.exp(-1.0 / 3)) / 2
    assert adapter.awr_loss(log_prob, advantages, 3.0).tolist() == pytest.approx([mean_weight, 2 * mean_weight], abs=1e-12)


def test_ppo_first_ratios_on_its_own_collected_batch_are_one():
    """Tianshou's PPO stores log pi_old in _preprocess_batch from the raw (pre-squash) actions the collector keeps: the
    first ratios are exactly 1, saturated tanh draws included."""
    loc, scale = torch.full((16, 2), 8.0), torch.full((16, 2), 0.5)
    for family in ("gaussian", "tanh_gaussian"):
        assert torch.equal(adapter.ppo_collected_ratios(family, loc, scale, 0), torch.ones(16))
    assert torch.equal(adapter.ppo_collected_ratios("categorical", torch.randn(8, 3, dtype=torch.float64), None, 1),
                       torch.ones(8, dtype=torch.float64))


def test_the_adapter_puts_back_what_it_replaces():
    """TD3's randn, Normal's standard draws, DiscreteCRR's Categorical and the torch RNG are Tianshou's and
    torch's again after each call."""
    import torch.distributions.normal as normal_module
    from tianshou.algorithm.imitation import discrete_crr
    from tianshou.algorithm.modelfree import td3

    from rlspec.checks.clauses import offpolicy as op_checks

    before = (td3.torch, normal_module._standard_normal, discrete_crr.Categorical, torch.get_rng_state())
    case = op_checks.td3_case()
    batch = {k: torch.as_tensor(v) for k, v in case.batch().items()}
    adapter.td3_critic_target(**_networks("td3_critic_target", case), **batch, gamma=0.9, noise=torch.as_tensor(case.noise),
                              noise_clip=0.3, low=torch.as_tensor(case.low), high=torch.as_tensor(case.high))
    sac = op_checks.KNOWN
    adapter.sac_actor_loss(**_networks("sac_actor_loss", sac), obs=torch.as_tensor(sac.obs), alpha=0.2,
                           noise=torch.as_tensor(op_checks.SAC_KNOWN_NOISE))
    adapter.awr_loss(torch.tensor([-1.0], dtype=torch.float64), torch.tensor([0.5], dtype=torch.float64), 1.0)
    _sampled([[1.0, 1.0]], [[1.0, 1.0]], [[-1.0, -1.0]], [1.0], [-1.0, -1.0], [1.0, 1.0])
    after = (td3.torch, normal_module._standard_normal, discrete_crr.Categorical, torch.get_rng_state())
    assert after[:3] == before[:3] and torch.equal(after[3], before[3])


# ---------------------------------------------------------------------------------------------
# normalisation (spec/clauses/35_normalisation.toml): RunningMeanStd, VectorEnvNormObs, the logged entropy


def test_running_mean_std_starts_empty_with_float32_epsilon():
    from tianshou.utils import RunningMeanStd

    rms = RunningMeanStd()
    assert rms.count == 0 and rms.eps == float(np.finfo(np.float32).eps) and rms.clip_max == 10.0
    rms.update(np.array([[1.0], [3.0]]))
    assert (float(rms.mean[0]), float(rms.var[0])) == (2.0, 1.0)


def test_logged_entropy_is_the_mean_of_the_rows_entropies():
    logits = np.array([[0.0, -1000.0], [-1000.0, 0.0], [0.0, 0.0]])
    assert float(adapter.diagnostic_entropy(logits)) == pytest.approx(np.log(2) / 3, abs=1e-6)

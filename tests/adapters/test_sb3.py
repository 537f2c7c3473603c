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

"""The ``verl`` adapter against verl 0.9.1: its verdicts and its variants' (tests/adapters/expected/verl.toml:
``verl:whitened`` takes compute_gae_advantage_return's advantages as returned), and the facts behind them
measured directly on verl's functions.

Skipped when verl is not installed, unless RLSPEC_REQUIRE_ADAPTERS=1 (.ci/adapters), where a
missing library is an error.
"""

import math
import os

import numpy as np
import pytest

if os.environ.get("RLSPEC_REQUIRE_ADAPTERS"):
    import verl as _verl  # noqa: F401 - .ci/adapters: the library must be there
else:
    pytest.importorskip("verl")

import torch  # noqa: E402
import verl.trainer.ppo.core_algos as core_algos  # noqa: E402

from _verdicts import run, verdict_tests  # noqa: E402

from rlspec.checks.adapters import verl as adapter  # noqa: E402

F64 = torch.float64

test_verdict, test_unlisted_clauses, test_table_names_every_candidate = verdict_tests("verl")


def test_version_is_the_one_the_adapter_was_written_against():
    assert adapter.RLSPEC_VERSION.startswith("verl 0.9."), adapter.RLSPEC_VERSION


def test_whitened_variant_diagnosis_names_the_whitening():
    """verl:whitened fails every token_gae clause (the table); the likely cause it prints names the whitening."""
    assert "whiten" in run("verl:whitened")["RLHF-GAE-KNOWN-ANSWER"].cause


def test_the_two_rloo_implementations_disagree_on_a_singleton():
    scores, groups = torch.tensor([1.0, 0.0, 3.0], dtype=F64), torch.tensor([0, 0, 1])
    assert adapter.group_advantages(scores, groups, "rloo").tolist() == [1.0, -1.0, 3.0]
    assert adapter.vectorized.group_advantages(scores, groups, "rloo").tolist() == [1.0, -1.0, 0.0]


# ---------------------------------------------------------------------------------------------
# facts, on verl's own functions

P1 = dict(rewards=np.ones(4), values=np.full(4, 0.5), next_values=np.array([0.5, 0.5, 0.5, 2.0]),
          terminated=np.array([False, True, False, False]), truncated=np.zeros(4, bool), gamma=0.5, lam=0.5)
P2 = {**P1, "next_values": np.array([0.5, 3.0, 0.5, 2.0]), "terminated": np.zeros(4, bool),
      "truncated": np.array([False, True, False, False])}


def test_gae_returns_whitened_advantages_p1():
    """P1 as verl rows (the bootstrap gamma V = 1 folded into the last reward): raw [0.875, 0.5 | 1.125, 1.5],
    returned advantages whitened with the unbiased variance."""
    rewards = torch.tensor([[1.0, 1.0], [1.0, 2.0]], dtype=F64)
    values = torch.full((2, 2), 0.5, dtype=F64)
    advantages, returns = core_algos.compute_gae_advantage_return(rewards, values, torch.ones(2, 2, dtype=torch.int64),
                                                                  0.5, 0.5)
    raw = (returns - values).flatten()
    assert raw.tolist() == [0.875, 0.5, 1.125, 1.5]
    expected = (raw - raw.mean()) / torch.sqrt(raw.var(unbiased=True) + 1e-8)
    assert advantages.flatten().tolist() == pytest.approx([-0.2970442, -1.1881770, 0.2970442, 1.1881770], abs=1e-6)
    assert advantages.flatten().tolist() == pytest.approx(expected.tolist(), abs=1e-7)
    assert adapter.gae(**P1)[0].tolist() == [0.875, 0.5, 1.125, 1.5]
    assert adapter.gae(**P2)[0].tolist() == [1.25, 2.0, 1.125, 1.5]  # truncation folded into r_1


def test_gae_raises_on_a_one_token_batch():
    """The whitening inside compute_gae_advantage_return refuses one real token; the raw candidate does not."""
    one = torch.ones(1, 1, dtype=F64)
    with pytest.raises(ValueError, match="sum of the mask is one"):
        core_algos.compute_gae_advantage_return(one, 0 * one, torch.ones(1, 1, dtype=torch.int64), 1.0, 1.0)
    advantages, returns = adapter.token_gae(one, 0 * one, torch.ones(1, 1, dtype=torch.bool), 1.0, 1.0)
    assert advantages.tolist() == [[1.0]] and returns.tolist() == [[1.0]]


def test_interior_hole_is_skipped():
    rewards = torch.tensor([[1.0, 1e6, -1e6, 1.0, 2.0]], dtype=F64)
    values = torch.tensor([[0.5, 1e6, 7.0, 0.5, 0.5]], dtype=F64)
    mask = torch.tensor([[True, False, False, True, True]])
    advantages, _ = adapter.token_gae(rewards, values, mask, 0.5, 0.5)
    assert advantages[0, [0, 3, 4]].tolist() == [1.03125, 1.125, 1.5]


def test_grpo_singleton_is_the_raw_score():
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 2.0], dtype=F64)
    groups = torch.tensor([0, 0, 0, 0, 1, 2])
    grpo = adapter.group_advantages(scores, groups, "grpo")
    assert grpo.dtype == torch.float32  # verl's token rewards (rm_scores) are float32
    assert grpo.tolist() == pytest.approx([0.8660239, -0.8660239, -0.8660239, 0.8660239, 0.4999995, 1.999998], abs=1e-6)
    assert adapter.group_advantages(scores, groups, "mean").tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5, 0.5, 2.0])
    assert adapter.group_advantages(scores, groups, "rloo").tolist() == pytest.approx(
        [2 / 3, -2 / 3, -2 / 3, 2 / 3, 0.5, 2.0], abs=1e-6)
    nan_group = adapter.group_advantages(torch.tensor([1.0, math.nan, 0.0], dtype=F64), torch.zeros(3, dtype=torch.long), "grpo")
    assert torch.isnan(nan_group).all()  # GROUP-UNSCORABLE-EXCLUDED (verl.xfail)


def test_dual_clip_is_always_on_and_the_log_ratio_is_clamped():
    def loss_and_grad(log_r, A, dual_clip):
        logp_new = torch.tensor([[log_r]], dtype=F64, requires_grad=True)
        loss = adapter.token_ppo_loss(logp_new, torch.zeros(1, 1, dtype=F64), torch.tensor([[A]], dtype=F64),
                                      torch.ones(1, 1, dtype=torch.bool), 0.2, 0.2, dual_clip)
        return loss.item(), torch.autograd.grad(loss, logp_new)[0].item()

    assert loss_and_grad(math.log(4.0), -2.0, 3.0) == pytest.approx((6.0, 0.0))
    assert loss_and_grad(math.log(3.5), -2.0, None) == pytest.approx((7.0, 7.0))  # clip_ratio_c = 1e9 never binds
    assert loss_and_grad(25.0, -2.0, None) == pytest.approx((2 * math.exp(20), 0.0))  # exp(clamp(25, -20, 20))
    config = adapter._actor_config(0.2, 0.2, 1.0, "token-sum")  # c = 1 cannot switch it off: asserted > 1
    with pytest.raises(AssertionError, match="clip_ratio_c"):
        core_algos.compute_policy_loss_vanilla(torch.zeros(1, 1), torch.zeros(1, 1), -torch.ones(1, 1),
                                               torch.ones(1, 1, dtype=torch.bool), "token-sum", config)


def test_aggregation_width_and_the_vanishing_epsilon():
    loss = torch.ones(2, 3, dtype=F64, requires_grad=True)
    mask = torch.tensor([[True, False, False], [True, True, True]])
    assert adapter.aggregate_loss(loss, mask, "seq-mean-token-sum-norm").item() == pytest.approx(2 / 3)
    wide = torch.ones(2, 6, dtype=F64)
    wide_mask = torch.cat([mask, torch.zeros(2, 3, dtype=torch.bool)], dim=1)
    assert adapter.aggregate_loss(wide, wide_mask, "seq-mean-token-sum-norm").item() == pytest.approx(1 / 3)  # padded width
    # n_b + 1e-8 with an integer count is float32, where it rounds to n_b: the epsilon acts only on a float mask
    (grad_bool,) = torch.autograd.grad(core_algos.agg_loss(loss, mask, "seq-mean-token-mean"), loss)
    (grad_float,) = torch.autograd.grad(core_algos.agg_loss(loss, mask.to(F64), "seq-mean-token-mean"), loss)
    assert grad_bool[0, 0].item() == 0.5 and grad_float[0, 0].item() == pytest.approx(0.5 / (1 + 1e-8), rel=1e-12)


def test_rewards_known_answer():
    rewards = adapter.assemble_rewards(torch.tensor([5.0], dtype=F64), torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=F64),
                                       torch.tensor([[True, True, True, False]]), 0.5)
    assert rewards.dtype == torch.float32
    assert rewards[0].tolist() == pytest.approx([-0.05, -0.1, 4.85, 0.0], abs=1e-6)


def test_value_loss_p10():
    vpreds = torch.tensor([2.0, 0.0, 1.0], dtype=F64, requires_grad=True)
    loss = adapter.ppo_value_loss(vpreds, torch.tensor([3.0, -1.0, 1.2], dtype=F64), torch.ones(3, dtype=F64), 0.5)
    assert loss.item() == pytest.approx(0.7566666666666667)
    assert torch.autograd.grad(loss, vpreds)[0].tolist() == pytest.approx([0.0, 0.0, -0.0666666667])
    assert adapter.ppo_value_loss(vpreds, torch.tensor([3.0, -1.0, 1.2], dtype=F64)).item() == pytest.approx(0.34)


def test_k3_clamp_biases_the_most_divergent_tokens():
    """kl_penalty "k3" clamps at 10: logp = -0.1, ref = -15 gives 10 (exact 13.9); p = [0.01, 0.99],
    q = [0.2, 0.8]: E_p[k3] = 0.120962 instead of KL(p || q) = 0.181005, and no gradient on the clamped token."""
    value = core_algos.kl_penalty(torch.tensor([-0.1], dtype=F64), torch.tensor([-15.0], dtype=F64), "k3")
    assert value.item() == 10.0
    p, q = torch.tensor([0.01, 0.99], dtype=F64), torch.tensor([0.2, 0.8], dtype=F64)
    logp = p.log().requires_grad_(True)
    k3 = adapter.kl_penalty(logp, q.log(), "k3")
    assert float((p * k3.detach()).sum()) == pytest.approx(0.120962, abs=1e-6)
    assert float((p * (p.log() - q.log())).sum()) == pytest.approx(0.181005, abs=1e-6)
    (grad,) = torch.autograd.grad(k3[0], logp)
    assert grad[0].item() == 0.0  # unclamped: 1 - q/p = -19

"""The ``openrlhf`` adapter against OpenRLHF 0.11.2: its verdicts (tests/adapters/expected/openrlhf.toml),
how it loads the library's files, and the library facts behind the verdicts.

Skipped when openrlhf is not installed, unless RLSPEC_REQUIRE_ADAPTERS=1 (.ci/adapters), where a
missing library is an error.
"""

import base64
import hashlib
import math
import os
import sys
from importlib.metadata import distribution
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("RLSPEC_REQUIRE_ADAPTERS"):
    import openrlhf as _openrlhf  # noqa: F401 - .ci/adapters: the library must be there
else:
    pytest.importorskip("openrlhf")

import torch  # noqa: E402

from _verdicts import run, table, verdict_tests  # noqa: E402

from rlspec.checks import load, run_conformance# noqa: E402
from rlspec.checks.adapters import openrlhf as adapter  # noqa: E402

ORL = adapter._orl

test_verdict, test_unlisted_clauses, test_table_names_every_candidate = verdict_tests("openrlhf")
# OpenRLHF has token-mean and seq-mean-token-mean only (aggregate_loss_modes declared): the clauses judge those
AGG_TWO_MODES = ("RLHF-AGG-KNOWN-ANSWER", "RLHF-AGG-GRADIENT-WEIGHTS", "RLHF-AGG-WIDTH-INDEPENDENT",
                 "RLHF-AGG-LENGTH-BIAS", "RLHF-AGG-MASKED-ZERO-GRADIENT")


def test_version_is_the_one_the_adapter_was_written_against():
    assert adapter.RLSPEC_VERSION == f"openrlhf {adapter.WRITTEN_AGAINST}", adapter.RLSPEC_VERSION


def test_loads_by_bare_name_with_its_declarations():
    candidate = load("openrlhf")
    assert candidate.precision == "float32" and candidate.array == "torch"
    assert candidate.conventions["log_ratio_clamp"] == 20.0
    assert candidate.conventions["group_std_eps"] == 1e-9
    xfails = {clause for clause, verdict in table("openrlhf")["openrlhf"].items() if verdict.quick == "xfail"}
    assert set(candidate.xfail) == xfails


def test_aggregation_is_judged_on_its_two_modes():
    note = "judged on the declared modes token-mean, seq-mean-token-mean only (aggregate_loss_modes)"
    assert all(note in run("openrlhf")[clause].notes for clause in AGG_TWO_MODES)


# ---------------------------------------------------------------------------------------------
# loading: the installed files, unmodified, and nothing fake left behind


def _record_hashes() -> dict[str, str]:
    dist = distribution("openrlhf")
    hashes = {}
    for line in dist.read_text("RECORD").splitlines():
        path, digest, _ = line.rsplit(",", 2)
        if digest.startswith("sha256="):
            hashes[path] = digest[len("sha256="):]
    return hashes


def test_the_executed_files_are_the_installed_wheel_files_unmodified():
    hashes = _record_hashes()
    for module in (ORL.utils, ORL.loss, ORL.maker):
        path = Path(module.__file__)
        relative = path.relative_to(path.parents[len(module.__name__.split(".")) - 1]).as_posix()
        digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
        assert hashes[relative] == digest, f"{relative} differs from the wheel's RECORD"
        assert module.__spec__.origin == str(path)


def test_no_bare_package_or_stub_is_left_in_sys_modules():
    assert "openrlhf.trainer.ray.launcher" not in sys.modules
    # the packages registered bare are gone again (a real import, where it works, would have run __init__)
    assert "openrlhf.models" not in sys.modules or hasattr(sys.modules["openrlhf.models"], "Actor")
    assert "openrlhf.trainer.ray" not in sys.modules or hasattr(sys.modules["openrlhf.trainer.ray"], "create_vllm_engines")
    # loading again is cheap and gives the same modules
    again = adapter.load_openrlhf()
    assert again.utils is ORL.utils and again.maker is ORL.maker
    assert "openrlhf.trainer.ray.launcher" not in sys.modules


# ---------------------------------------------------------------------------------------------
# the facts behind the verdicts (gamma = lambda = 0.5, V = 0.5)


def _rows(*rows):
    return torch.tensor(rows, dtype=torch.float64)


def test_gae_probes():
    P1 = dict(rewards=np.ones(4), values=np.full(4, 0.5), next_values=np.array([0.5, 0.5, 0.5, 2.0]),
              terminated=np.array([False, True, False, False]), truncated=np.zeros(4, bool), gamma=0.5, lam=0.5)
    P2 = {**P1, "next_values": np.array([0.5, 3.0, 0.5, 2.0]), "terminated": np.zeros(4, bool),
          "truncated": np.array([False, True, False, False])}
    advantages, returns = adapter.gae(**P1)
    assert advantages.tolist() == [0.875, 0.5, 1.125, 1.5] and returns.tolist() == [1.375, 1.0, 1.625, 2.0]
    assert adapter.gae(**P2)[0].tolist() == [1.25, 2.0, 1.125, 1.5]  # bootstrap 3.0 folded into r_1
    # P1 as one row, no episode end: the trace runs through (what a row without its done flag gives)
    one_row, _ = adapter.token_gae(_rows([1, 1, 1, 2]), _rows([0.5] * 4), torch.ones(1, 4, dtype=torch.bool), 0.5, 0.5)
    assert one_row.tolist() == [[1.0078125, 1.03125, 1.125, 1.5]]
    assert adapter.gae(**{**P1, "lam": 1.0})[0].tolist() == [1.0, 0.5, 1.5, 1.5]
    assert adapter.gae(**{**P1, "lam": 0.0})[0].tolist() == [0.75, 0.5, 0.75, 1.5]


def test_token_gae_padding_and_the_interior_hole():
    values = lambda row: _rows(row)  # noqa: E731
    mask = lambda row: torch.tensor([row], dtype=torch.bool)  # noqa: E731
    reference, _ = adapter.token_gae(_rows([1, 1, 2]), values([0.5] * 3), mask([1, 1, 1]), 0.5, 0.5)
    assert reference.tolist() == [[1.03125, 1.125, 1.5]]
    right, right_returns = adapter.token_gae(_rows([1, 1, 2, 7, -9]), values([0.5, 0.5, 0.5, 40, -3]), mask([1, 1, 1, 0, 0]),
                                             0.5, 0.5)
    assert right[0, :3].tolist() == [1.03125, 1.125, 1.5]
    assert right[0, 3:].tolist() == [0.0, 0.0] and right_returns[0, 3:].tolist() == [0.0, 0.0]
    left, _ = adapter.token_gae(_rows([7, -9, 1, 1, 2]), values([40, -3, 0.5, 0.5, 0.5]), mask([0, 0, 1, 1, 1]), 0.5, 0.5)
    assert left[0, 2:].tolist() == [1.03125, 1.125, 1.5]
    # the defect: a hole after the first token is two steps with r = V = 0, not skipped
    hole, _ = adapter.token_gae(_rows([1, 9, 9, 1, 2]), values([0.5, 9, 9, 0.5, 0.5]), mask([1, 0, 0, 1, 1]), 0.5, 0.5)
    assert hole[0, [0, 3, 4]].tolist() == [0.533203125, 1.125, 1.5]  # skipped: [1.03125, 1.125, 1.5]


def test_compute_reward_example():
    rewards = adapter.assemble_rewards(torch.tensor([5.0]), torch.tensor([[0.1, 0.2, 0.3, 0.4]]),
                                       torch.tensor([[1, 1, 1, 0]], dtype=torch.bool), 0.5)
    # the KL term is not masked: the pad keeps -0.2 (outputs at masked positions are not compared)
    assert torch.allclose(rewards, torch.tensor([[-0.05, -0.1, 4.85, -0.2]]))


def test_group_estimators_and_whitening():
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    one = np.zeros(4, dtype=np.int64)
    g = 0.8660254022844387  # 0.5 / (0.5774 + 1e-9): torch's unbiased std plus group_norm's 1e-9
    assert adapter.group_advantages(scores, one, "grpo").tolist() == pytest.approx([g, -g, -g, g], abs=1e-15)
    assert adapter.group_advantages(scores, one, "rloo").tolist() == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3], abs=1e-15)
    assert adapter.group_advantages(scores, one, "mean").tolist() == [0.5, -0.5, -0.5, 0.5]
    # ids in any order; groups of different sizes are separate rollout batches (each n fixed), same numbers
    mixed = torch.tensor([1.0, 5.0, 0.0, 7.0, 0.0, 1.0], dtype=torch.float64)
    ids = np.array([3, 9, 3, 9, 9, 3])
    for kind in ("grpo", "rloo", "mean"):
        together = adapter.group_advantages(mixed, ids, kind)
        for g in (3, 9):
            alone = adapter.group_advantages(mixed[ids == g], ids[ids == g], kind)
            assert together[ids == g].tolist() == alone.tolist()
        sized = adapter.group_advantages(torch.cat([mixed, torch.tensor([2.0, 4.0], dtype=torch.float64)]),
                                         np.concatenate([ids, [5, 5]]), kind)
        assert sized[:6].tolist() == together.tolist()
    with pytest.raises(ValueError, match="n_samples_per_prompt > 1"):
        adapter.group_advantages(mixed[:3], np.array([0, 0, 1]), "grpo")
    # whitening across the batch: biased variance, (A - mean) * var.clamp(min=1e-8).rsqrt(), the mean and
    # variance in float32 (torch.cat(...).float()): OpenRLHF's own output, not the float64 reference
    # [-0.7716996107766287, 0.2305076759462657, -0.9220307037850628, -0.370816696087471, 1.834039334702897]
    raw = torch.tensor([-0.125, 0.5, -0.21875, 0.125, 1.5], dtype=torch.float64)
    assert adapter.normalize_advantages(raw).tolist() == pytest.approx(
        [-0.7716995629247236, 0.23050768647827624, -0.9220306503351736, -0.3708166631635237, 1.834039285523076], rel=1e-15)


def _loss_and_grad(function, logp_new, *args, **kwargs):
    logp_new = torch.tensor(logp_new, dtype=torch.float64, requires_grad=True)
    loss = function(logp_new, *args, **kwargs)
    (grad,) = torch.autograd.grad(loss, logp_new)
    return loss.item(), grad


def test_policy_loss_gradient_table_dual_clip_and_log_ratio_clamp():
    r = torch.tensor([[0.5, 1.0, 1.5, 0.5, 1.0, 1.5, 3.5, 4.0]], dtype=torch.float64)
    A = torch.tensor([[2.0, 2.0, 2.0, -2.0, -2.0, -2.0, -2.0, -2.0]], dtype=torch.float64)
    old, mask = torch.zeros_like(r), torch.ones_like(r, dtype=torch.bool)
    _, grad = _loss_and_grad(adapter.token_ppo_loss, r.log().tolist(), old, A, mask, 0.2, 0.2)
    assert grad[0].tolist() == pytest.approx([-1.0, -2.0, 0.0, 0.0, 2.0, 3.0, 7.0, 8.0], abs=1e-12)
    # dual clip 3: A = -2 beyond r = 3 is capped at loss 6 with zero gradient
    for ratio in (3.5, 4.0):
        loss, grad = _loss_and_grad(adapter.token_ppo_loss, [[math.log(ratio)]], torch.zeros(1, 1, dtype=torch.float64),
                                    torch.tensor([[-2.0]], dtype=torch.float64), torch.ones(1, 1, dtype=torch.bool), 0.2, 0.2,
                                    dual_clip=3.0)
        assert loss == pytest.approx(6.0) and grad.item() == 0.0
    # the +-20 clamp of the log ratio: log r = 25 acts as 20 (loss 2 e^20) with zero gradient
    loss, grad = _loss_and_grad(adapter.token_ppo_loss, [[25.0]], torch.zeros(1, 1, dtype=torch.float64),
                                torch.tensor([[-2.0]], dtype=torch.float64), torch.ones(1, 1, dtype=torch.bool), 0.2, 0.2)
    assert loss == pytest.approx(970330390.8195806, rel=1e-12) and grad.item() == 0.0
    # the token sum: masked tokens contribute nothing, and batch_num_tokens = 1 keeps each token's own gradient
    loss, grad = _loss_and_grad(adapter.token_ppo_loss, [[0.0, 5.0]], torch.zeros(1, 2, dtype=torch.float64),
                                torch.tensor([[2.0, 1e3]], dtype=torch.float64), torch.tensor([[True, False]]), 0.2, 0.2)
    assert loss == -2.0 and grad[0].tolist() == [-2.0, 0.0]


def test_aggregation_modes_openrlhf_has():
    losses = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    weights = {
        "token-mean": [[0.25, 0.0, 0.0], [0.25, 0.25, 0.25]],
        # each row's sum / (n_b + 1e-8); with OpenRLHF's bool action_mask the count is int64 and n_b + 1e-8 is
        # float32, where it rounds to n_b (with a float mask it gives 0.4999999950000001)
        "seq-mean-token-mean": [[0.5, 0.0, 0.0], [1 / 6, 1 / 6, 1 / 6]],
    }
    for mode, expected in weights.items():
        loss = adapter.aggregate_loss(losses, mask, mode)
        (grad,) = torch.autograd.grad(loss, losses)
        assert grad.flatten().tolist() == pytest.approx(sum(expected, []), rel=1e-15)
        # width independence and garbage at masked positions: two more all-masked columns of 1e6
        wide = torch.cat([losses, torch.full((2, 2), 1e6, dtype=torch.float64)], dim=1)
        wide_mask = torch.cat([mask, torch.zeros(2, 2, dtype=torch.bool)], dim=1)
        assert adapter.aggregate_loss(wide, wide_mask, mode).item() == loss.item()
    # Dr. GRPO's length bias: 2 tokens and 10 tokens: 1/4 and 1/20 per token (token-mean: 1/12 each)
    mask = torch.zeros(2, 10, dtype=torch.bool)
    mask[0, :2], mask[1, :] = True, True
    losses = torch.ones(2, 10, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(adapter.aggregate_loss(losses, mask, "seq-mean-token-mean"), losses)
    assert grad[0, 0].item() == pytest.approx(1 / 4) and grad[1, 0].item() == pytest.approx(1 / 20)
    (grad,) = torch.autograd.grad(adapter.aggregate_loss(losses, mask, "token-mean", num_tokens=12), losses)
    assert grad[mask].tolist() == pytest.approx([1 / 12] * 12, rel=1e-15) and grad[~mask].abs().sum().item() == 0.0
    for mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm"):
        with pytest.raises(NotImplementedError, match="token-mean"):
            adapter.aggregate_loss(losses, mask, mode)


def test_value_loss_has_the_half():
    values = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert adapter.ppo_value_loss(values, torch.zeros(2, dtype=torch.float64)).item() == 0.5 * (1 + 4) / 2
    # clipped: max of the clipped and unclipped squared errors
    old = torch.tensor([0.0, 0.0], dtype=torch.float64)
    clipped = adapter.ppo_value_loss(values, torch.tensor([3.0, 3.0], dtype=torch.float64), old, 0.5).item()
    assert clipped == 0.5 * ((3 - 0.5) ** 2 + (3 - 0.5) ** 2) / 2


# the KL known answer: p = pi = [0.2, 0.3, 0.5] (sampling), q = pi_ref = [0.4, 0.4, 0.2]
P = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
Q = torch.tensor([0.4, 0.4, 0.2], dtype=torch.float64)
REVERSE = [-0.185272, -0.156268, 0.341540]
FORWARD = [-0.2, -0.1, 0.3]


def test_kl_values_are_float32_with_the_notes_numbers():
    per_sample = {"k1": [-0.693147, -0.287682, 0.916291], "k2": [0.240227, 0.04138, 0.419794],
                  "k3": [0.306853, 0.045651, 0.316291]}
    for kind, expected in per_sample.items():
        value = adapter.kl_penalty(P.log()[None], Q.log()[None], kind)
        assert value.dtype == torch.float32  # whatever it is given
        assert value[0].tolist() == pytest.approx(expected, abs=1e-6)
        assert adapter.kl_penalty(P.log()[None], Q.log()[None], kind + "+")[0].tolist() == pytest.approx(expected, abs=1e-6)
        assert adapter.kl_estimate(P.log(), Q.log(), kind).tolist() == pytest.approx(expected, abs=1e-6)
    assert float((P * adapter.kl_penalty(P.log()[None], Q.log()[None], "k3")[0]).sum()) == pytest.approx(0.23321131, abs=1e-7)


def test_kl_clamps():
    """Every estimator is clamped to [-10, 10] (the defect in docs/bugs-found.md), k3's log ratio at -10."""
    clamped = lambda logp, ref, kind: adapter.kl_penalty(torch.tensor([[logp]]), torch.tensor([[ref]]), kind).item()  # noqa: E731
    assert [clamped(-0.1, -15.0, k) for k in ("k1", "k2", "k3")] == [10.0, 10.0, 10.0]  # unclamped 14.9, 111.0, 13.9
    assert [clamped(-15.0, -0.1, k) for k in ("k1", "k2", "k3")] == [-10.0, 10.0, 10.0]  # unclamped -14.9, 111.0, 2957913.3
    # where k3's clamp starts: pi_ref / pi = 13.6109 (x = 2.61087, e^x - 1 - x = 10); gradient 0 beyond
    for x, clamps in ((2.6, False), (2.62, True)):
        logp = torch.tensor([[0.0]], dtype=torch.float64, requires_grad=True)
        value = adapter.kl_penalty(logp, torch.tensor([[x]], dtype=torch.float64), "k3")
        (grad,) = torch.autograd.grad(value.sum(), logp)
        assert (value.item() == 10.0) is clamps and (grad.item() == 0.0) is clamps


def _expected_gradient(kind, sampler, logp_old=None):
    theta = P.log().clone().requires_grad_(True)
    logp = torch.log_softmax(theta, 0)
    kl = adapter.kl_penalty(logp[None], Q.log()[None], kind, logp_old=None if logp_old is None else logp_old[None])
    (grad,) = torch.autograd.grad((sampler * kl[0]).sum(), theta)
    return grad.tolist()


def test_kl_as_a_loss_gradients():
    assert _expected_gradient("k1", P) == pytest.approx([0, 0, 0], abs=1e-7)
    assert _expected_gradient("k2", P) == pytest.approx(REVERSE, abs=1e-6)
    assert _expected_gradient("k3", P) == pytest.approx(FORWARD, abs=1e-6)
    for kind in ("k1+", "k2+", "k3+"):
        assert _expected_gradient(kind, P) == pytest.approx(REVERSE, abs=1e-6)
        # off-policy, tokens from pi_old = [0.3, 0.3, 0.4]: importance-weighted back to the reverse KL
        old = torch.tensor([0.3, 0.3, 0.4], dtype=torch.float64)
        assert _expected_gradient(kind, old, old.log()) == pytest.approx(REVERSE, abs=1e-6)
    # w = pi / pi_old = e^3 = 20.1 is clipped to KL_IS_WEIGHT_CLIP = 10: the gradient of 10 k2 = 10 log(pi / pi_ref)
    logp = P.log()[None].clone().requires_grad_(True)
    kl = adapter.kl_penalty(logp, Q.log()[None], "k1+", logp_old=P.log()[None] - 3)
    (grad,) = torch.autograd.grad(kl.sum(), logp)
    assert ORL.utils.KL_IS_WEIGHT_CLIP == 10.0
    assert grad[0].tolist() == pytest.approx([-6.931472, -2.876821, 9.162908], abs=1e-5)


def test_off_policy_deviation_is_exactly_the_importance_weight_clip(monkeypatch):
    """KL-PENALTY-OFF-POLICY is xfail because of KL_IS_WEIGHT_CLIP alone: lifted, the clause passes."""
    clause = ["KL-PENALTY-OFF-POLICY"]
    assert run_conformance("openrlhf", profile="quick", seed=0, clauses=clause)["KL-PENALTY-OFF-POLICY"].status == "xfail"
    monkeypatch.setattr(ORL.utils, "KL_IS_WEIGHT_CLIP", math.inf)  # compute_approx_kl reads the module global
    result = run_conformance("openrlhf", profile="quick", seed=0, clauses=clause)["KL-PENALTY-OFF-POLICY"]
    assert result.status == "pass" and any("can go" in note for note in result.notes), (result.status, result.message)

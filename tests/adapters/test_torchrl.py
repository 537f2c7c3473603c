"""The ``torchrl`` adapter against TorchRL 0.14.1 / tensordict 0.14.3: its verdicts and its variants'
(tests/adapters/expected/torchrl.toml), and the library facts the adapter relies on.

Skipped when torchrl is not installed, unless RLSPEC_REQUIRE_ADAPTERS=1 (.ci/adapters), where a
missing library is an error.
"""

import os

import numpy as np
import pytest

if os.environ.get("RLSPEC_REQUIRE_ADAPTERS"):
    import torchrl  # noqa: F401 - .ci/adapters: the library must be there
else:
    pytest.importorskip("torchrl")

import torch  # noqa: E402

from _verdicts import verdict_tests  # noqa: E402

from rlspec.checks import load  # noqa: E402
from rlspec.checks.adapters import torchrl as adapter  # noqa: E402

test_verdict, test_unlisted_clauses, test_table_names_every_candidate = verdict_tests("torchrl")


def test_version_is_the_one_the_adapter_was_written_against():
    assert adapter.RLSPEC_VERSION == "torchrl 0.14.1, tensordict 0.14.3", adapter.RLSPEC_VERSION


def test_loads_by_bare_name_with_its_declarations():
    candidate = load("torchrl")
    assert candidate.precision == "float32" and candidate.array == "torch"
    assert candidate.conventions["advantage_eps_form"] == "clamp"


# ---------------------------------------------------------------------------------------------
# the facts behind the verdicts, on the GAE known answers

P1 = dict(rewards=[1.0] * 4, values=[0.5] * 4, next_values=[0.5, 0.5, 0.5, 2.0],
          terminated=[False, True, False, False], truncated=[False] * 4, gamma=0.5, lam=0.5)
P2 = {**P1, "next_values": [0.5, 3.0, 0.5, 2.0], "terminated": [False] * 4, "truncated": [False, True, False, False]}


def tensors(case, **changes):
    case = {**case, **changes}
    out = {k: torch.tensor(case[k], dtype=torch.float64) for k in ("rewards", "values", "next_values")}
    out.update({k: torch.tensor(case[k]) for k in ("terminated", "truncated")})
    return {**out, "gamma": case["gamma"], "lam": case["lam"]}


def test_gae_known_answers():
    assert adapter.gae(**tensors(P1))[0].tolist() == [0.875, 0.5, 1.125, 1.5]
    assert adapter.gae(**tensors(P2))[0].tolist() == [1.25, 2.0, 1.125, 1.5]
    assert adapter.gae(**tensors(P2))[1].tolist() == [1.75, 2.5, 1.625, 2.0]
    assert adapter.gae_module.gae(**tensors(P2))[0].tolist() == [1.25, 2.0, 1.125, 1.5]


def test_terminated_omitted_treats_truncation_as_termination():
    """TorchRL defaults terminated to done: P2's data gives P1's answer."""
    assert adapter.gae_without_terminated.gae(**tensors(P2))[0].tolist() == [0.875, 0.5, 1.125, 1.5]


def test_vectorised_gae_raises_at_gamma_lambda_zero():
    """The smallest reproduction, TorchRL alone (the vectorised GAE at gamma * lambda = 0)."""
    from torchrl.objectives.value.functional import vec_generalized_advantage_estimate

    x = torch.ones(1, 3, 1, dtype=torch.float64)
    done = torch.zeros(1, 3, 1, dtype=torch.bool)
    with pytest.raises(IndexError):
        vec_generalized_advantage_estimate(0.9, 0.0, x, x, x, done, terminated=done)
    assert adapter.vec_gae.gae(**tensors(P1, lam=0.9))[0].shape == (4,)  # fine once gamma * lambda > 0


def test_gamma_is_rounded_to_float32_on_float64_data():
    """Why the adapter declares RLSPEC_PRECISION = "float32" (float32 coefficients)."""
    one = lambda: torch.ones(1, dtype=torch.float64)
    flags = torch.zeros(1, dtype=torch.bool)
    advantage, _ = adapter.gae(torch.zeros(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64), one(),
                               flags, flags, 0.99, 0.95)
    assert advantage.dtype == torch.float64
    assert advantage.item() == float(np.float32(0.99)) != 0.99


def test_clip_gradient_table_p5():
    for A, r, expected in [(2, 0.5, -1.0), (2, 1.0, -2.0), (2, 1.5, 0.0), (-2, 0.5, 0.0), (-2, 1.0, 2.0), (-2, 1.5, 3.0)]:
        logp_new = torch.tensor([0.0], dtype=torch.float64, requires_grad=True)
        logp_old = torch.tensor([-np.log(r)], dtype=torch.float64)
        loss = adapter.ppo_clip_loss(logp_new, logp_old, torch.tensor([float(A)], dtype=torch.float64), 0.2)
        (grad,) = torch.autograd.grad(loss, logp_new)
        assert grad.item() == pytest.approx(expected, abs=1e-6), (A, r)


def test_value_loss_normalisation_and_kl_penalty_conventions_p8_p10():
    V = torch.tensor([0.0, 0.0], dtype=torch.float64, requires_grad=True)
    R = torch.tensor([0.5, 3.0], dtype=torch.float64)
    l2 = adapter.l2_critic.ppo_value_loss
    assert l2(V, R).item() == pytest.approx((0.25 + 9.0) / 2)  # l2, no 0.5
    clipped = l2(V, R, torch.tensor([0.3, -1.0], dtype=torch.float64), 0.2)
    assert clipped.item() == pytest.approx((0.25 + 14.44) / 2, rel=1e-6)  # the clipped value loss: [0.25, 14.44]
    # the default smooth L1 (Huber, delta 1): e^2 / 2 below |e| = 1, |e| - 1/2 above (torchrl.xfail)
    assert adapter.ppo_value_loss(V, R).item() == pytest.approx((0.125 + 2.5) / 2)
    normalised = adapter.normalize_advantages(torch.tensor([0.0, 1e-7], dtype=torch.float64))
    assert normalised.tolist() == pytest.approx([-0.05, 0.05], rel=1e-5)  # std clamped at 1e-6, not + eps
    assert adapter.normalize_advantages(torch.tensor([3.0], dtype=torch.float64)).tolist() == [3.0]
    assert adapter.kl_coefficient_update(1.0, 0.233211, 0.01).item() == 2.0  # the KL known answer's KL above 1.5 x target: beta 1 -> 2
    assert adapter.kl_coefficient_update(1.0, 0.001, 0.01).item() == 0.5


def test_tanh_normal_p11():
    """Stable Jacobian in float64; the action is re-inverted with a clamp at 1 - resolution."""
    def at(u, dtype=torch.float64):
        t = lambda x: torch.tensor([[x]], dtype=dtype)
        return adapter.tanh_gaussian_log_prob(t(0.3), t(np.log(1.5)), t(u)).item()

    assert at(2.0) == pytest.approx(0.683380, abs=1e-6)
    assert at(10.0) == pytest.approx(-3.619587, abs=1e-6)
    assert at(20.0) == pytest.approx(-34.112726, abs=1e-5)  # exact: -48.952920 (inverse clamped)
    assert at(10.0, torch.float32) == pytest.approx(1.057882, abs=1e-4)  # exact: -3.619587

"""The ``rlax`` adapter against rlax 0.1.9 (JAX on CPU, x64): its verdicts (tests/adapters/expected/rlax.toml),
how truncation can and cannot be expressed, and the library facts the adapter relies on.

Skipped when rlax is not installed, unless RLSPEC_REQUIRE_ADAPTERS=1 (.ci/adapters), where a
missing library is an error.
"""

import os

import numpy as np
import pytest

if os.environ.get("RLSPEC_REQUIRE_ADAPTERS"):
    import rlax  # noqa: F401 - .ci/adapters: the library must be there
else:
    pytest.importorskip("rlax")

import torch  # noqa: E402

from _verdicts import verdict_tests  # noqa: E402

from rlspec.checks import load# noqa: E402
from rlspec.checks.adapters import rlax as adapter  # noqa: E402

test_verdict, test_unlisted_clauses, test_table_names_every_candidate = verdict_tests("rlax")


def test_version_is_the_one_the_adapter_was_written_against():
    assert adapter.RLSPEC_VERSION.startswith("rlax 0.1.9, jax 0.10."), adapter.RLSPEC_VERSION


def test_loads_by_bare_name_and_runs_jax_in_x64():
    import jax

    assert "gae" in load("rlax").operations
    assert jax.config.jax_enable_x64


# ---------------------------------------------------------------------------------------------
# the facts behind the verdicts, on the GAE known answers

P1 = dict(rewards=np.ones(4), values=np.full(4, 0.5), next_values=np.array([0.5, 0.5, 0.5, 2.0]),
          terminated=np.array([False, True, False, False]), truncated=np.zeros(4, bool), gamma=0.5, lam=0.5)
P2 = {**P1, "next_values": np.array([0.5, 3.0, 0.5, 2.0]), "terminated": np.zeros(4, bool),
      "truncated": np.array([False, True, False, False])}


def test_gae_probes_and_the_ways_to_express_truncation():
    """P1, P2 by segments; P2 as one stream: discount 0 -> P1's answer, discount gamma -> leaks."""
    import jax.numpy as jnp
    import rlax

    assert adapter.gae(**P1)[0].tolist() == [0.875, 0.5, 1.125, 1.5]
    assert adapter.gae(**P2)[0].tolist() == [1.25, 2.0, 1.125, 1.5]
    assert adapter.stream_truncation_as_termination.gae(**P2)[0].tolist() == [0.875, 0.5, 1.125, 1.5]
    stream = jnp.array([0.5, 0.5, 0.5, 0.5, 2.0])
    leaking = rlax.truncated_generalized_advantage_estimation(jnp.ones(4), jnp.full(4, 0.5), 0.5, stream)
    assert np.asarray(leaking).tolist() == [1.0078125, 1.03125, 1.125, 1.5]


def test_inputs_must_be_rank_one():
    import jax.numpy as jnp
    import rlax

    with pytest.raises(AssertionError):
        rlax.truncated_generalized_advantage_estimation(jnp.ones((4, 2)), jnp.ones((4, 2)), 0.5, jnp.ones((5, 2)))


def test_clip_gradient_table_p5_and_ratio_p6():
    for A, r, expected in [(2, 0.5, -1.0), (2, 1.0, -2.0), (2, 1.5, 0.0), (-2, 0.5, 0.0), (-2, 1.0, 2.0), (-2, 1.5, 3.0),
                           (-2, 4.0, 8.0)]:  # no dual clip
        logp_new = torch.tensor([0.0], dtype=torch.float64, requires_grad=True)
        loss = adapter.ppo_clip_loss(logp_new, torch.tensor([-np.log(r)], dtype=torch.float64),
                                     torch.tensor([float(A)], dtype=torch.float64), 0.2)
        (grad,) = torch.autograd.grad(loss, logp_new)
        assert grad.item() == pytest.approx(expected, abs=1e-12), (A, r)
    logp_new = torch.tensor([-1000.0], dtype=torch.float64, requires_grad=True)
    loss = adapter.ppo_clip_loss(logp_new, torch.tensor([-1000.1], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64), 0.5)
    assert loss.item() == pytest.approx(-np.exp(0.1), rel=1e-12)


def test_squashed_gaussian_p11():
    """Stable Jacobian; distrax inverts the action with atanh, so tanh(u) = 1 in float32 is NaN."""
    at = lambda u, dtype=np.float64: adapter.tanh_gaussian_log_prob(
        np.array([[0.3]], dtype), np.array([[np.log(1.5)]], dtype), np.array([[u]], dtype)).item()
    assert at(2.0) == pytest.approx(0.683380, abs=1e-6)
    assert at(10.0) == pytest.approx(-3.619587, abs=1e-6)
    assert np.isnan(at(10.0, np.float32)) and np.isnan(at(20.0))  # tanh(20) == 1 in float64 too
    wrapper = adapter.squashed_gaussian.tanh_gaussian_log_prob
    assert wrapper(np.array([[0.3]]), np.array([[np.log(1.5)]]), np.array([[2.0]])).item() == pytest.approx(0.683380, abs=1e-6)
    with pytest.raises(ValueError, match="outside"):
        wrapper(np.array([[1.5]]), np.zeros((1, 1)), np.zeros((1, 1)))

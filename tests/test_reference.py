"""The reference is pinned to hand-computed and exact values, not only to its own checks, and
passes every clause."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REPEAT
from rlspec.checks import run_conformance
from rlspec.checks.kit.strategies import rollouts
from rlspec.reference import gae as ref
from rlspec.reference.returns import rewards_to_go
from rlspec.spec import catalogue, contract

P1 = contract.known_answer("gae.terminal-after-step-1")
P2 = contract.known_answer("gae.truncated-after-step-1")


@pytest.mark.parametrize("answer", list(contract.known_answers("gae").values()), ids=lambda a: a.id)
def test_the_reference_gives_every_gae_known_answer_exactly(answer):
    advantages, returns = ref.gae(**answer.arrays())
    assert advantages.tolist() == answer.outputs["advantages"]  # exact: dyadic rationals
    assert returns.tolist() == answer.outputs["returns"]


def test_both_flags_set_is_terminal():
    both = dict(P2.arrays(), terminated=P2.arrays()["truncated"])
    assert ref.gae(**both)[0].tolist() == P1.outputs["advantages"]


@pytest.mark.parametrize("answer", list(contract.known_answers("rewards_to_go").values()), ids=lambda a: a.id)
def test_rewards_to_go_known_answers(answer):
    assert rewards_to_go(**answer.arrays()).tolist() == answer.outputs["returns"]  # exact: dyadic rationals


def test_rewards_to_go_of_an_empty_episode():
    assert rewards_to_go(np.array([], dtype=float), 0.9).tolist() == []


def test_float32_in_float32_out():
    p = {k: (v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype != bool else v) for k, v in P1.arrays().items()}
    assert ref.gae(**p)[0].dtype == np.float32


@pytest.mark.parametrize("K", range(1, 9))
@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0])
def test_mixture_weights_sum_to_one(K, lam):
    weights = ref.lambda_mixture_weights(K, lam)
    assert len(weights) == K and weights.sum() == pytest.approx(1.0, abs=1e-15)


def test_segment_lengths():
    term = np.array([0, 1, 0, 0, 0], bool)
    trunc = np.array([0, 0, 0, 1, 0], bool)
    assert ref.segment_lengths(term, trunc).tolist() == [2, 1, 2, 1, 1]


@given(rollouts(n_envs=st.none() | st.integers(1, 3)))
def test_mixture_form_equals_recursion(rollout):
    r = rollout
    recursion = ref.gae(r.rewards, r.values, r.next_values, r.terminated, r.truncated, r.gamma, r.lam)[0]
    mixture = ref.lambda_mixture_advantage(r.rewards, r.values, r.next_values, r.terminated, r.truncated, r.gamma, r.lam)
    scale = np.abs(r.rewards).sum() + np.abs(r.values).sum() + np.abs(r.next_values).sum() + 1e-300
    np.testing.assert_allclose(mixture, recursion, rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=REPEAT), pytest.param(2, marks=REPEAT)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_reference_passes_every_clause(seed, dtype):
    run = run_conformance("reference", seed=seed, dtype=dtype)
    assert run.ok, [(r.id, r.message) for r in run.failures]
    assert all(r.status == "pass" for r in run.results)


@REPEAT  # the quick runs above count its lines, but for five lines of rarer drawn branches it still runs (docs/speed.md)
@pytest.mark.parametrize("chapter", [c.name for c in catalogue.chapters()])
def test_reference_passes_every_clause_at_ci_profile(chapter):
    """One test per chapter, so that parallel test workers share the ci profile's long run."""
    clauses = [c.id for c in catalogue.clauses() if c.chapter == chapter]
    run = run_conformance("reference", clauses=clauses, profile="ci", seed=1)
    assert run.ok, [(r.id, r.message) for r in run.failures]
    assert len(run.results) == len(clauses)

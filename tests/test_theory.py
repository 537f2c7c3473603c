"""The theory chapter: the reference's new dynamic programming against independent computations, the chapter's
numbers, and its checks on cases built to fail."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from rlspec.checks.clauses import theory as th
from rlspec.reference import gridworld as gw
from rlspec.spec import catalogue


@pytest.fixture(scope="module")
def mdp():
    return th.started()


def test_policy_gradient_matches_finite_differences(mdp):
    S, A = mdp.P.shape[:2]
    z = np.random.default_rng(0).normal(size=(S, A))
    J = lambda logits: gw.finite_horizon_values(mdp, gw.softmax_policy(logits), th.HORIZON)[0][th.HORIZON][mdp.start]
    numeric = np.zeros((S, A))
    for s in range(S):
        for a in range(A):
            step = np.zeros((S, A))
            step[s, a] = 1e-6
            numeric[s, a] = (J(z + step) - J(z - step)) / 2e-6
    assert np.abs(numeric - gw.policy_gradient(mdp, gw.softmax_policy(z), th.HORIZON)).max() < 1e-8


def test_action_paths_and_return_moments(mdp):
    policy = th.GREEDY.probs
    paths = gw.enumerate_action_paths(mdp, policy, th.HORIZON)
    assert paths.prob.sum() == pytest.approx(1.0, abs=1e-14)
    samples = th.samples_of(th.GREEDY)
    first = samples.t == 0
    A = mdp.P.shape[1]
    for moment, table in ((1, gw.finite_horizon_values(mdp, policy, th.HORIZON)[1][-1]),
                          (2, gw.return_second_moments(mdp, policy, th.HORIZON))):
        by_action = np.bincount(samples.action[first], weights=samples.prob[first] * samples.whole[first] ** moment, minlength=A)
        assert by_action / policy[mdp.start] == pytest.approx(table[mdp.start], abs=1e-14)


def test_surrogate_is_exact_at_the_old_policy():
    exact = th.exact_mdp()
    policy = th.GREEDY.exact
    assert gw.surrogate(exact, policy, policy) == gw.state_values(exact, policy)[exact.start]


def test_the_bound_is_exact_and_loose_on_the_gridworld():
    bound = th.exact_bound(th.UNIFORM, th.GREEDY)
    assert isinstance(bound.error, Fraction) and abs(bound.error) <= bound.C * bound.alpha**2
    assert bound.C * bound.alpha**2 / abs(bound.error) > 1000  # loose by three orders of magnitude here


def test_the_fixed_cql_dataset_overestimates_somewhere():
    exact = th.conservative(th.draw_dataset(th.CQL_DATASET_SEED), th.GREEDY)
    assert 0 < exact.alpha_star <= exact.alpha_theorem


def test_variance_cases_are_on_both_sides_of_the_claim():
    (p1, q1), (p2, q2) = th.VARIANCE_CASES.values()
    assert th.exact_variance("k3", p1, q1) > th.exact_variance("k1", p1, q1)
    assert th.exact_variance("k3", p2, q2) < th.exact_variance("k1", p2, q2) and np.max(np.exp(q2 - p2)) <= 2


@pytest.mark.parametrize("clause", [c for c in catalogue.clauses() if c.chapter == "theory"], ids=lambda c: c.id)
def test_catalogue_notes_are_generated(clause):
    assert clause.notes == " ".join(th.theory_notes(clause.id).split()), \
        "regenerate the notes of spec/clauses/75_theory.toml from rlspec.checks.clauses.theory.theory_notes()"


def test_the_penalised_search_needs_the_improvement_test():
    """The fixed descent step lowers J by a clear margin: returning it is a failure, not rounding."""
    problem = th.Penalised(th.GREEDY, 1.0)
    pi = th.GREEDY.probs
    grad = problem.occupancy[:, None] * pi * (problem.advantages - (pi * problem.advantages).sum(axis=1, keepdims=True))
    x0 = np.log(pi).ravel()
    full = x0 - grad.ravel() / np.linalg.norm(grad) * 2.0
    assert th.J_of(full) < th.J_of(x0) - 0.05
    bound_C = float(th.exact_bound(th.GREEDY, th.GREEDY).C)
    M = dataclasses.replace(problem, C=bound_C)
    M.__post_init__()
    assert all(M.M(x0 + 0.5**k * (full - x0)) < M.M(x0) for k in range(10))

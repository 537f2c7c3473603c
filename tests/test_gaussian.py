"""The Gaussian-policy chapter: the reference is pinned to exact numbers (the tanh known answer, bugs F1-F5),
the suite's oracles and tolerances are right (the closed forms agree with torch.distributions, the
quadrature integrates the exact density to 1, the tolerance admits torch's softplus and nothing an
epsilon form gets wrong), and a non-finite log-density is a failure of the stability clause."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings

from rlspec.checks import run_conformance
from rlspec.checks.clauses import gaussian as checks
from rlspec.checks.runner.loader import from_object
from rlspec.checks.kit.strategies import gaussian as gaussian_strategies
from rlspec.reference import gaussian as ref
from rlspec.spec import contract

zeros = lambda *shape: np.zeros(shape)


# ---------------------------------------------------------------------------------------------
# the reference against the known answers


@pytest.mark.parametrize("answer", [a for a in contract.known_answers().values() if a.id.startswith("gaussian.")], ids=lambda a: a.id)
def test_the_reference_gives_every_known_answer(answer):
    name, expected = next(iter(answer.outputs)), np.array(answer.value(next(iter(answer.outputs))))
    actual = getattr(ref, answer.operation)(**answer.arrays())
    stated = ~np.isnan(expected)
    np.testing.assert_allclose(actual[stated], expected[stated], rtol=0, atol=answer.published_error(name))


def test_the_tanh_known_answer_splits_into_the_gaussian_and_the_jacobian():
    """u = 1, mean 0, std 1: log N(1) = -1.4189385, the Jacobian term +0.8675616, log pi = -0.5513769."""
    assert ref.diag_gaussian_log_prob(zeros(1, 1), zeros(1, 1), np.array([[1.0]]))[0] == pytest.approx(-1.4189385332, abs=1e-10)
    assert -ref.tanh_log_det_jacobian(np.array(1.0)) == pytest.approx(0.8675616, abs=1e-7)
    total = -1.4189385332 + 0.8675616
    assert total == pytest.approx(contract.known_answer("gaussian.tanh-at-1").value("log_prob")[0], abs=1e-7)


def test_saturated_values_float64_and_float32():
    exact = -200.0 - 0.5 * math.log(2 * math.pi) + 2 * (20.0 - math.log(2.0))  # log N(20) - log(1 - tanh(20)^2)
    assert ref.tanh_gaussian_log_prob(zeros(1, 1), zeros(1, 1), np.array([[20.0]]))[0] == pytest.approx(exact, rel=1e-15)
    assert exact == pytest.approx(-162.305233, abs=1e-6)  # the research probe's exact(stable form)
    low = ref.tanh_gaussian_log_prob(np.zeros((1, 1), np.float32), np.zeros((1, 1), np.float32), np.array([[-20.0]], np.float32))
    assert low.dtype == np.float32 and low[0] == pytest.approx(exact, rel=1e-6)


def test_entropy_is_the_sum_over_dimensions():
    assert ref.diag_gaussian_entropy(zeros(2, 3)) == pytest.approx([3 * 1.4189385332] * 2, abs=1e-9)
    assert ref.diag_gaussian_entropy(np.array([[math.log(2.0)]]))[0] == pytest.approx(0.5 * math.log(2 * math.pi * math.e * 4))


def test_stable_jacobian_is_even_and_finite_everywhere():
    u = np.array([-800.0, -20.0, -1.0, 0.0, 1.0, 20.0, 800.0])
    j = ref.tanh_log_det_jacobian(u)
    assert np.all(np.isfinite(j)) and np.allclose(j, j[::-1], rtol=1e-15, atol=0)
    assert j[3] == 0.0


def test_scale_action_maps_minus_one_and_one_to_the_bounds():
    low, high = np.array([-2.0, 0.0]), np.array([2.0, 1.0])
    assert ref.scale_action(np.array([-1.0, -1.0]), low, high).tolist() == [-2.0, 0.0]
    assert ref.scale_action(np.array([1.0, 1.0]), low, high).tolist() == [2.0, 1.0]


# ---------------------------------------------------------------------------------------------
# the suite's oracles and tolerances


@settings(max_examples=30, deadline=None)
@given(gaussian_strategies.gaussian_batches(x_range=(-3.0, 3.0)))
def test_closed_forms_agree_with_torch_distributions(batch):
    mean, log_std, x = batch
    tol = checks.diag_tolerance(mean, log_std, x, 2.0**-53)
    assert np.all(np.abs(checks.gaussian_terms(mean, log_std, x).sum(-1) - checks.torch_log_prob(mean, log_std, x)) <= tol)
    tol = checks.tanh_tolerance(mean, log_std, x, 2.0**-53)
    assert np.all(np.abs(checks.tanh_log_prob(mean, log_std, x) - checks.torch_log_prob(mean, log_std, x, squash=True)) <= tol)


def test_the_quadrature_integrates_the_exact_density_to_one():
    for mean, log_std in checks.QUADRATURE_KNOWN:
        u = mean + math.exp(log_std) * checks.GRID
        h = 0.5 * math.exp(log_std)
        density = np.exp(checks.tanh_log_prob(np.full((49, 1), mean), np.full((49, 1), log_std), u[:, None]) + checks.log_sech2(u))
        assert h * density.sum() == pytest.approx(1.0, abs=1e-14)


def test_the_tolerance_admits_torch_softplus_but_not_an_epsilon_form():
    mean, log_std, u = np.zeros((1, 1)), np.zeros((1, 1)), np.array([[-12.0]])
    tol = checks.tanh_tolerance(mean, log_std, u, 2.0**-53)[0]
    exact = checks.tanh_log_prob(mean, log_std, u)[0]
    torch_value = checks.torch_log_prob(mean, log_std, u, squash=True)[0]
    assert abs(torch_value - exact) <= tol  # torch's softplus returns x for x > 20
    eps_form = checks.gaussian_terms(mean, log_std, u).sum() - np.log(1.0 - np.tanh(u[0, 0]) ** 2 + 1e-6)
    assert abs(eps_form - exact) > 1e3 * tol


def test_magnitudes_cover_a_float32_computation_of_float64_inputs():
    """The input-rounding terms of the bound: scoring in float32 what arrived in float64 stays inside it."""
    rng = np.random.default_rng(0)
    mean, log_std, x = rng.uniform(-5, 5, (200, 3)), rng.uniform(-3, 2, (200, 3)), rng.uniform(-10, 10, (200, 3))
    f32 = ref.diag_gaussian_log_prob(*(a.astype(np.float32) for a in (mean, log_std, x))).astype(np.float64)
    exact = checks.gaussian_terms(mean, log_std, x).sum(-1)
    assert np.all(np.abs(f32 - exact) <= checks.diag_tolerance(mean, log_std, x, 2.0**-24))


# ---------------------------------------------------------------------------------------------
# verdicts


class _Candidate:
    __file__ = __file__  # the loader looks for an adapter's .xfail file beside the object's module file

    def __init__(self, **ops):
        for name, fn in ops.items():
            setattr(self, name, fn)


def test_a_non_finite_log_density_fails_the_stability_clause():
    naive = lambda mean, log_std, pre_tanh: ref.diag_gaussian_log_prob(mean, log_std, pre_tanh) - np.sum(
        np.log(1.0 - np.tanh(pre_tanh) ** 2), axis=-1)
    result = run_conformance(from_object(_Candidate(tanh_gaussian_log_prob=naive)), clauses=["TANH-STABLE-AT-SATURATION"])
    verdict = result["TANH-STABLE-AT-SATURATION"]
    # the cause names the candidate's own form: its +inf rows are the textbook Jacobian's (equal infinities match)
    assert verdict.status == "fail" and "inf" in verdict.message and "log(1 - tanh(u)^2), evaluated as written" in verdict.cause


def test_a_wrong_shape_is_an_error():
    per_dim = lambda mean, log_std, action: -0.5 * ((action - mean) / np.exp(log_std)) ** 2
    result = run_conformance(from_object(_Candidate(diag_gaussian_log_prob=per_dim)), clauses=["GAUSS-DIAG-LOG-PROB-CLOSED-FORM"])
    assert result["GAUSS-DIAG-LOG-PROB-CLOSED-FORM"].status == "error"


def test_torch_candidates_receive_tensors():
    seen = []

    def log_prob(mean, log_std, action):
        seen.append(type(mean))
        return torch.distributions.Independent(torch.distributions.Normal(mean, log_std.exp()), 1).log_prob(action)

    candidate = _Candidate(diag_gaussian_log_prob=log_prob)
    candidate.RLSPEC_ARRAY = "torch"
    assert run_conformance(from_object(candidate), clauses=["gaussian"]).ok and seen[0] is torch.Tensor


# ---------------------------------------------------------------------------------------------
# diagnoses


def test_diagnoses_name_the_specific_mistake_or_fall_back():
    no_log_sigma = lambda mean, log_std, action: np.sum(checks.gaussian_terms(mean, log_std, action) + log_std, axis=-1)
    result = run_conformance(from_object(_Candidate(diag_gaussian_log_prob=no_log_sigma)), clauses=["GAUSS-DIAG-LOG-PROB-CLOSED-FORM"])
    assert "normalising term" in result["GAUSS-DIAG-LOG-PROB-CLOSED-FORM"].cause
    log_density_at_mean = lambda log_std: np.sum(0.5 * checks.LOG_2PI + log_std, axis=-1)
    result = run_conformance(from_object(_Candidate(diag_gaussian_entropy=log_density_at_mean)), clauses=["GAUSS-ENTROPY"])
    assert "1/2 of 1/2 log(2 pi e)" in result["GAUSS-ENTROPY"].cause
    shifted = lambda mean, log_std, pre_tanh: ref.tanh_gaussian_log_prob(mean, log_std, pre_tanh) + 0.1
    result = run_conformance(from_object(_Candidate(tanh_gaussian_log_prob=shifted)), clauses=["TANH-LOG-PROB-CHANGE-OF-VARIABLES"])
    assert result["TANH-LOG-PROB-CHANGE-OF-VARIABLES"].status == "fail"
    scaled = lambda mean, log_std, pre_tanh, low, high: ref.scaled_tanh_gaussian_log_prob(mean, log_std, pre_tanh, low, high) + 0.1
    result = run_conformance(from_object(_Candidate(scaled_tanh_gaussian_log_prob=scaled)), clauses=["TANH-SCALED-BOUNDS"])
    # a constant shift matches no known mistake: what is known is reported (a cause only with evidence)
    assert result["TANH-SCALED-BOUNDS"].status == "fail" and (result["TANH-SCALED-BOUNDS"].cause or result["TANH-SCALED-BOUNDS"].evidence)

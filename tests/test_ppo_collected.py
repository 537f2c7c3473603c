"""PPO-COLLECTED-RATIOS-ONE: the first ratios on a candidate's own collected batch (ppo_collected_ratios)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given

from rlspec.checks import run_conformance
from rlspec.checks.clauses import ppo
from rlspec.checks.kit.strategies import ppo as draws
from rlspec.reference import collection

CLAUSE = "PPO-COLLECTED-RATIOS-ONE"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_reference_scores_what_it_stored(dtype):
    loc, scale = torch.full((64, 2), 8.0, dtype=dtype), torch.full((64, 2), 0.5, dtype=dtype)
    for family, args in (("tanh_gaussian", (loc, scale)), ("gaussian", (loc, scale)), ("categorical", (loc, None))):
        ratios = collection.ppo_collected_ratios(family, *args, seed=3)
        assert ratios.dtype == dtype and torch.equal(ratios, torch.ones(64, dtype=dtype))


def test_a_saturated_float32_draw_cannot_be_recovered_from_its_action():
    """Why the squashed buffer keeps u: from u = 9.01 tanh(u) is exactly 1 in float32."""
    u = torch.tensor([9.02, 12.0])
    assert torch.equal(torch.tanh(u), torch.ones(2)) and torch.isinf(torch.atanh(torch.tanh(u))).all()


def test_the_tolerance_grows_with_the_terms_and_stays_far_below_a_clip():
    u = np.finfo(np.float32).eps / 2
    loc, scale = np.full((1, 1), 8.0), np.full((1, 1), 0.5)
    tanh = ppo.collected_tolerance("tanh_gaussian", loc, scale, u)[0]
    gauss = ppo.collected_tolerance("gaussian", loc, scale, u)[0]
    logits = ppo.collected_tolerance("categorical", np.array([[0.0, 1.0, -2.0]]), None, u)[0]
    assert logits < gauss < tanh < 1e-3  # a PPO clip is 0.1 to 0.3 away


@given(draws.collected_cases(dtype=np.float64))
def test_drawn_cases_are_what_the_contract_describes(case):
    family, loc, scale, dtype, seed = case
    assert loc.ndim == 2 and np.all(np.isfinite(loc)) and dtype in ("float32", "float64") and 0 <= seed < 2**31
    assert np.array_equal(loc, loc.astype(dtype).astype(np.float64))
    if family == "categorical":
        assert scale is None and loc.shape[1] >= 2
    else:
        assert scale.shape == loc.shape and np.all(scale > 0)


def test_an_undeclared_family_is_not_judged_and_the_verdict_says_so():
    """A candidate whose PPO has no squashed policy declares the families it collects with; the clause judges those."""
    def ppo_collected_ratios(family, loc, scale, seed):
        if family == "tanh_gaussian":
            raise AssertionError("not declared: never called")
        return collection.ppo_collected_ratios(family, loc, scale, seed)

    candidate = SimpleNamespace(ppo_collected_ratios=ppo_collected_ratios,
                                RLSPEC_CONVENTIONS={"ppo_collected_families": ["categorical", "gaussian"]})
    result = run_conformance(candidate, clauses=[CLAUSE])[CLAUSE]
    assert result.status == "pass" and any("ppo_collected_families" in note for note in result.notes)


def test_ratios_of_one_by_fiat_pass_and_a_ratio_off_by_a_clip_fails():
    """The clause judges the returned ratios only (the operation runs the candidate's own path); a loss that re-scores
    one sample in a thousand 1e-3 away is caught."""
    ones = SimpleNamespace(ppo_collected_ratios=lambda family, loc, scale, seed: torch.ones(loc.shape[0], dtype=loc.dtype))
    assert run_conformance(ones, clauses=[CLAUSE])[CLAUSE].status == "pass"

    def off(family, loc, scale, seed):
        ratios = torch.ones(loc.shape[0], dtype=loc.dtype)
        ratios[-1] = 1.001
        return ratios

    result = run_conformance(SimpleNamespace(ppo_collected_ratios=off), clauses=[CLAUSE])[CLAUSE]
    assert result.status == "fail" and "first ratios on the collected batch" in result.message

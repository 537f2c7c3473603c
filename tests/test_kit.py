"""The checking kit the chapters share: every public strategy draws what it promises from its defaults and
names a bad argument, and the shared math modules are the chapters' only copy of their formulas (which way
imports run, chapters and kit included, is tests/test_layers.py's)."""

from __future__ import annotations

import importlib
import inspect
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument, NonInteractiveExampleWarning

from conftest import ROOT
from rlspec.checks.kit import clipping
from rlspec.checks.kit.strategies import base, groups, kl, ppo, tokens, trust_region

STRATEGY_MODULES = sorted(p.stem for p in (ROOT / "checks" / "kit" / "strategies").glob("*.py") if p.stem != "__init__")


def public_strategies():
    """Every public strategy function of the strategies package that can be called with its defaults."""
    found = []
    for name in STRATEGY_MODULES:
        module = importlib.import_module(f"rlspec.checks.kit.strategies.{name}")
        for attr, function in vars(module).items():
            if attr.startswith("_") or not inspect.isfunction(function) or function.__module__ != module.__name__:
                continue
            parameters = inspect.signature(function).parameters.values()
            if all(p.default is not p.empty for p in parameters):
                result = function()
                if isinstance(result, st.SearchStrategy):
                    found.append((f"{name}.{attr}", function))
    return found


@pytest.mark.parametrize("name, function", public_strategies(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_strategy_draws_from_its_defaults(name, function):
    @settings(max_examples=3, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(function())
    def draws(example):
        assert example is not None

    draws()


@pytest.mark.parametrize("strategy", [
    lambda: base.normal_floats(1.0, 0.0),
    lambda: base.normal_floats(0.0, 1.0, width=16),
    lambda: base.float_lists(st.just(1.0), min_size=3, max_size=2),
    lambda: base.float32_arrays((-1,), 0.0, 1.0),
    lambda: base.real_arrays(3, 1.0, -1.0),
    lambda: ppo.clip_batches(max_size=0),
    lambda: ppo.clip_batches(dtype=np.int32),
    lambda: ppo.wrong_way_batches(clip_range=1.2),
    lambda: ppo.first_step_cases(common=[1]),
    lambda: kl.extreme_cases(kinds=("k4",)),
    lambda: kl.logits(0),
    lambda: groups.grouped_scores(min_size=0),
    lambda: groups.constant_groups(kinds=()),
    lambda: groups.moderate_categoricals(count=0),
    lambda: groups.token_batches(log_ratio=(1.0, -1.0)),
    lambda: tokens.gae_cases(min_rows=0),
    lambda: tokens.gae_cases(padding=("middle",)),
    lambda: tokens.ppo_cases(clip=(0.2, 1.5)),
    lambda: tokens.aggregation_cases(modes=()),
    lambda: trust_region.spd_matrices(max_condition=0.5),
    lambda: trust_region.vectors(3, max_abs=1.0, min_norm=2.0),
    lambda: trust_region.step_problems(max_condition=0.0),
])
def test_a_bad_argument_is_named(strategy):
    with pytest.raises(InvalidArgument):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NonInteractiveExampleWarning)
            strategy().example()


def test_the_rounding_is_what_a_candidate_receives():
    x = np.array([0.1, 1.0 / 3.0, 1e-40])
    assert base.rounded(x, np.float32).dtype == np.float64
    np.testing.assert_array_equal(base.rounded(x, np.float32), x.astype(np.float32).astype(np.float64))
    np.testing.assert_array_equal(base.rounded(x, np.float64), x)


def test_the_clipped_surrogate_has_one_home():
    """The PPO and RLHF chapters read the clipped objective and its bounds from checks/kit/clipping.py."""
    from rlspec.checks.clauses import ppo as ppo_chapter, rlhf as rlhf_chapter

    for chapter in (ppo_chapter, rlhf_chapter):
        assert chapter.clip_objective is clipping.clip_objective and chapter.ClipRange is clipping.ClipRange

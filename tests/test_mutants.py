"""Every catalogued bug is caught: each mutant in tests/mutants fails (not errors) every clause it
names, at the quick profile, on every one of 20 seeds. A failure reached before the checks consumed anything
seed-dependent (a clause's fixed known answers) is the same failure on every seed, so it is run once
(docs/speed.md); the seed-dependence tests below hold that recognition sound."""

from __future__ import annotations

import random
import types

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import MUTANTS, mutant_metadata
from rlspec.checks import load, run_conformance
from rlspec.checks.kit.assertions import ClauseFailure
from rlspec.checks.runner.loader import from_object
from rlspec.checks.kit.registry import Check
from rlspec.checks.runner.verdict import DTYPES, PROFILES, run_clause
from rlspec.reference.gae import gae as reference_gae
from rlspec.spec import catalogue

SEEDS = range(20)
CASES = [(m, clause) for m in MUTANTS for clause in mutant_metadata(m)["clauses"]]


@pytest.mark.parametrize("mutant, clause", CASES, ids=[f"{m.stem}-{c}" for m, c in CASES])
def test_mutant_is_caught_by_its_clause_on_every_seed(mutant, clause):
    candidate = load(str(mutant))
    missed = []
    for seed in SEEDS:
        result = run_conformance(candidate, clauses=[clause], seed=seed)[clause]
        if result.status != "fail":
            missed.append((seed, result.status, result.message))
            continue
        if seed == 0:  # the report stands alone: what went wrong, why (or the evidence), and the command that replays it
            assert result.message and (result.cause or result.evidence) and result.replay, (mutant.stem, clause)
            assert f"--only {clause}" in result.replay and "--seed 0" in result.replay, result.replay
        if not result.seed_dependent:
            # The clause failed before anything seed-dependent was consumed: no check had read the seed (no drawn
            # example, no seeded RNG) and no global RNG had moved (ClauseResult.seed_dependent). Every other seed
            # replays the very same computation up to the very same failure, so running it proves nothing more.
            # (That the candidate itself gives the same outputs on a rerun is tests/test_reproducibility.py's.)
            break
    assert not missed, f"{mutant.stem} ({mutant_metadata(mutant)['bug']}) escaped {clause}: {missed[:3]}"


def test_a_float32_failure_replays_at_float32():
    mutant = MUTANTS[0]
    clause = mutant_metadata(mutant)["clauses"][0]
    result = run_conformance(str(mutant), clauses=[clause], dtype="float32")[clause]
    assert result.status == "fail" and result.replay.endswith(f"--only {clause} --profile quick --seed 0 --dtype float32")


# --- when one seed stands for all: ClauseResult.seed_dependent ----------------------------------------------

EXAMPLE = dict(rewards=np.ones(4), values=np.full(4, 0.5), next_values=np.full(4, 0.5), terminated=np.zeros(4, bool),
               truncated=np.zeros(4, bool), gamma=0.5, lam=0.5)


def verdict_of(*steps, candidate="reference", seed=0):
    """Run one clause (GAE-SEED-EXAMPLE) whose only check calls the candidate on a fixed input, does ``steps``
    (each ``step(ctx)``), then fails: the verdict of a check that fails where the mutants' known answers do."""

    def check(ctx):
        ctx.call("gae", EXAMPLE, outputs=2)
        for step in steps:
            step(ctx)
        raise ClauseFailure("a fixed known answer is off")

    loaded = load(candidate) if isinstance(candidate, str) else candidate
    clause = catalogue.by_id("GAE-SEED-EXAMPLE")
    return run_clause(loaded, clause, PROFILES["quick"], seed, DTYPES["float64"], [Check(clause.id, "check", check, __name__)])


def bare_given(ctx):
    # derandomize stated: Hypothesis loads its own "ci" profile (derandomize=True) where a CI variable is set,
    # and a derandomized @given may draw the same examples whatever the run's seed (then nothing moves).
    @settings(max_examples=2, database=None, derandomize=False)
    @given(st.integers())
    def drawn(_):
        pass

    drawn()


@pytest.mark.parametrize("step", [
    pytest.param(lambda ctx: None, id="fixed-known-answer"),
    pytest.param(lambda ctx: np.random.default_rng(20260101).standard_normal(3), id="a-fixed-seed-generator"),
    pytest.param(lambda ctx: ctx.examples("call"), id="the-example-budget"),
])
def test_a_seed_independent_failure_is_recognised(step):
    result = verdict_of(step)
    assert result.status == "fail" and result.seed_dependent is False
    assert [verdict_of(step, seed=s).message for s in (1, 2)] == [result.message] * 2


@pytest.mark.parametrize("step", [
    pytest.param(lambda ctx: ctx.seed, id="the-seed"),
    pytest.param(lambda ctx: ctx.seed_for("x"), id="seed_for"),
    pytest.param(lambda ctx: ctx.rng("x").random(), id="ctx.rng"),
    pytest.param(lambda ctx: ctx.property(st.integers(), lambda _: None, label="x"), id="a-drawn-property-that-passes"),
    pytest.param(lambda ctx: np.random.random(), id="numpy-global-rng"),
    pytest.param(lambda ctx: torch.rand(1), id="torch-global-rng"),
    pytest.param(lambda ctx: random.random(), id="python-random"),
    pytest.param(bare_given, id="a-bare-given-without-the-context"),
])
def test_a_seed_dependent_failure_is_not(step):
    """Whatever a check drew from, through the context or around it, before it failed makes the verdict
    seed-dependent: test_mutants then runs every seed."""
    state = np.random.get_state(), torch.get_rng_state(), random.getstate()
    try:
        result = verdict_of(step)
    finally:
        np.random.set_state(state[0]), torch.set_rng_state(state[1]), random.setstate(state[2])
    assert result.status == "fail" and result.seed_dependent is True


def test_a_candidate_drawing_from_a_global_rng_makes_the_failure_seed_dependent():
    """Its draws are undone after each call, but what it drew may have shaped what it returned."""

    def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
        noise = np.random.random() * 0.0
        return tuple(x + noise for x in reference_gae(rewards, values, next_values, terminated, truncated, gamma, lam))

    candidate = from_object(types.SimpleNamespace(gae=gae), spec="drawing")
    assert verdict_of(candidate=candidate).seed_dependent is True


def test_a_pass_or_a_drawn_failure_is_seed_dependent_and_a_known_answer_failure_is_not():
    """On the catalogue: the GAE forward-loop mutant fails GAE-BACKWARD-RECURSION on its fixed known answer (one
    seed stands for all), while the reference's properties read the seed."""
    mutant = load(str(next(m for m in MUTANTS if m.stem == "gae_forward_loop")))
    assert run_conformance(mutant, clauses=["GAE-BACKWARD-RECURSION"])["GAE-BACKWARD-RECURSION"].seed_dependent is False
    assert run_conformance("reference", clauses=["GAE-BACKWARD-RECURSION"])["GAE-BACKWARD-RECURSION"].seed_dependent is True


def test_seed_dependence_stays_out_of_the_json_report():
    result = verdict_of()
    assert "seed_dependent" not in result.to_json()

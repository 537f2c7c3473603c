"""Every catalogued bug is caught: each mutant in tests/mutants fails (not errors) every clause it
names, at the quick profile, on every one of 20 seeds."""

from __future__ import annotations

import pytest

from conftest import MUTANTS, mutant_metadata
from rlspec.checks import load, run_conformance

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
    assert not missed, f"{mutant.stem} ({mutant_metadata(mutant)['bug']}) escaped {clause}: {missed[:3]}"


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.stem for m in MUTANTS])
def test_failure_report_stands_alone(mutant):
    clause = mutant_metadata(mutant)["clauses"][0]
    result = run_conformance(str(mutant), clauses=[clause])[clause]
    assert result.message and (result.cause or result.evidence) and result.replay
    assert f"--only {clause}" in result.replay and "--seed 0" in result.replay

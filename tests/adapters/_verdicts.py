"""The expected verdicts of the built-in adapters, and the tests that hold each adapter to them.

A library's expected verdicts have one home, ``tests/adapters/expected/ADAPTER.toml``: one table per
candidate (the adapter and each of its ``VARIANTS``), listing every clause whose verdict is not the
default one. The default: a clause passes when the candidate provides every operation it exercises,
and is not-provided otherwise. A listed verdict is one status for both profiles, or
``{ quick = "...", ci = "..." }`` where the matrix's drawn examples (profile ``ci``) reach an input the
pre-commit profile's do not::

    [skrl]
    "GAE-TRUNCATION-BOOTSTRAP" = "fail"                         # docs/bugs-found.md #1
    "PPO-UPDATE-FIRST-RATIOS-ONE" = { quick = "pass", ci = "error" }

Two places read the tables. The library's own test file (``tests/adapters/test_ADAPTER.py``, run in
an environment that has the library) runs every candidate at ``quick``, seed 0, and compares each
verdict with the table (:func:`verdict_tests`); ``tests/adapters/test_matrix_verdicts.py`` compares the
``ci`` verdicts with the committed ``docs/conformance.json`` without importing any library. So the
matrix, the tests and the table cannot disagree: a changed verdict fails one of them until the table
(and, for a red cell, docs/bugs-found.md) says why.
"""

from __future__ import annotations

import functools
import importlib
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

EXPECTED_DIR = Path(__file__).with_name("expected")
STATUSES = ("pass", "fail", "error", "xfail", "skip", "not-provided")
PROFILES = ("quick", "ci")


@dataclass(frozen=True)
class Verdict:
    """A clause's expected status at the pre-commit profile and at the matrix's."""

    quick: str
    ci: str


def libraries() -> list[str]:
    """The adapters that have a table (the names of the files in tests/adapters/expected)."""
    return sorted(path.stem for path in EXPECTED_DIR.glob("*.toml"))


@functools.cache
def table(adapter: str) -> dict[str, dict[str, Verdict]]:
    """candidate -> clause id -> :class:`Verdict`, from ``expected/ADAPTER.toml`` (validated)."""
    path = EXPECTED_DIR / f"{adapter}.toml"
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    out: dict[str, dict[str, Verdict]] = {}
    for candidate, clauses in raw.items():
        if candidate != adapter and not candidate.startswith(f"{adapter}:"):
            raise ValueError(f"{path.name}: table [{candidate}] is not {adapter} or one of its variants")
        out[candidate] = {}
        for clause, value in clauses.items():
            verdict = Verdict(value, value) if isinstance(value, str) else Verdict(**value)
            bad = [s for s in (verdict.quick, verdict.ci) if s not in STATUSES]
            if bad:
                raise ValueError(f"{path.name}: [{candidate}] {clause} = {value!r}: not a status ({', '.join(STATUSES)})")
            out[candidate][clause] = verdict
    return out


def default_status(operations, provided) -> str:
    """The verdict of a clause the table does not list: pass if the candidate provides its operations."""
    needed = {operations} if isinstance(operations, str) else set(operations)
    return "pass" if needed <= set(provided) else "not-provided"


@functools.cache
def run(candidate: str, profile: str = "quick", seed: int = 0):
    """One conformance run per candidate and profile, shared by every test that reads it."""
    from rlspec.checks import run_conformance

    return run_conformance(candidate, profile=profile, seed=seed)


def _shown(result) -> str:
    first = result.message.splitlines()[0] if result.message else ""
    return f"{result.status}: {first[:300]}"


def verdict_tests(adapter: str):
    """The parametrised tests of one adapter's table, for its test module to bind::

        test_verdict, test_unlisted_clauses, test_table_names_every_candidate = verdict_tests("skrl")

    ``test_verdict``: each listed (candidate, clause) has its ``quick`` verdict. ``test_unlisted_clauses``:
    every other clause has the default verdict (a clause added to the catalogue since cannot change a
    verdict unnoticed). ``test_table_names_every_candidate``: the table's candidates are the adapter and
    its ``VARIANTS``, no more, no fewer."""
    expected = table(adapter)
    cases = [(candidate, clause) for candidate in sorted(expected) for clause in sorted(expected[candidate])]

    @pytest.mark.parametrize(("candidate", "clause"), cases, ids=[f"{c}-{k}" for c, k in cases])
    def test_verdict(candidate, clause):
        result = run(candidate)[clause]
        want = expected[candidate][clause].quick
        assert result.status == want, (f"{candidate} {clause}: expected {want}, got {_shown(result)} "
                                       f"(tests/adapters/expected/{adapter}.toml)")

    @pytest.mark.parametrize("candidate", sorted(expected))
    def test_unlisted_clauses(candidate):
        from rlspec.checks import load

        provided = load(candidate).operations
        wrong = []
        for result in run(candidate).results:
            if result.id in expected[candidate]:
                continue
            want = default_status(result.operation, provided)
            if result.status != want:
                wrong.append(f"{result.id}: expected {want}, got {_shown(result)}")
        assert not wrong, (f"{candidate}: verdicts the table does not list (add them to tests/adapters/expected/"
                           f"{adapter}.toml, and a red one to docs/bugs-found.md):\n  " + "\n  ".join(wrong))

    def test_table_names_every_candidate():
        module = importlib.import_module(f"rlspec.checks.adapters.{adapter}")
        have = {adapter, *(f"{adapter}:{variant}" for variant in getattr(module, "VARIANTS", ()))}
        assert set(expected) == have, f"tests/adapters/expected/{adapter}.toml names {sorted(expected)}; the adapter has {sorted(have)}"

    return test_verdict, test_unlisted_clauses, test_table_names_every_candidate

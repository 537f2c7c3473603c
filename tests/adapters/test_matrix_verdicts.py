"""The committed conformance matrix agrees with the adapters' expected verdicts, and every red cell is
explained in docs/bugs-found.md. Reads files only (docs/conformance.json, tests/adapters/expected/*.toml,
docs/bugs-found.md): no library is imported, so this runs in rlspec's own test suite.

docs/bugs-found.md names the cells each entry explains on ``Cells:`` lines (the format: rlspec.checks.matrix.bugs_found).
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

import pytest
from _verdicts import default_status, libraries, table

from rlspec.checks.matrix import bugs_found

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "docs" / "conformance.json"
BUGS = ROOT / "docs" / "bugs-found.md"
RED = ("fail", "error")


def matrix_cells() -> dict[str, dict[str, dict]]:
    """candidate -> clause id -> its result in docs/conformance.json."""
    matrix = json.loads(MATRIX.read_text(encoding="utf-8"))
    return {c["candidate"]: {r["id"]: r for r in c["run"]["clauses"]}
            for report in matrix["adapters"] for c in report["candidates"]}


def red_cells() -> set[tuple[str, str]]:
    return {(candidate, clause) for candidate, results in matrix_cells().items()
            for clause, result in results.items() if result["status"] in RED}


def explanations() -> list[tuple[str, bool, str, list[str]]]:
    """(section heading, is a defect entry, candidate, clause patterns) for every ``Cells:`` line (the one reader
    of that format: rlspec.checks.matrix.bugs_found)."""
    return [(x.heading, x.defect, x.candidate, list(x.patterns)) for x in bugs_found.explanations(BUGS.read_text(encoding="utf-8"))]


def test_every_candidate_of_the_matrix_has_an_expected_table_and_back():
    in_tables = {candidate for adapter in libraries() for candidate in table(adapter)}
    assert set(matrix_cells()) == in_tables


@pytest.mark.parametrize("adapter", libraries())
def test_the_matrix_has_the_expected_ci_verdicts(adapter):
    cells = matrix_cells()
    wrong = []
    for candidate, expected in table(adapter).items():
        results = cells[candidate]
        for clause, result in results.items():
            if clause not in expected:
                if result["status"] not in ("pass", "not-provided"):
                    wrong.append(f"{candidate} {clause}: {result['status']} (not listed: expected pass or not-provided)")
                continue
            want = expected[clause].ci
            if result["status"] != want:
                wrong.append(f"{candidate} {clause}: matrix {result['status']}, table {want}")
        missing = sorted(set(expected) - set(results))
        wrong += [f"{candidate} {clause}: in the table, not in the matrix" for clause in missing]
    assert not wrong, ("docs/conformance.json and tests/adapters/expected/" + adapter + ".toml disagree (regenerate the "
                       "matrix, or correct the table):\n  " + "\n  ".join(wrong))


def test_every_red_cell_is_explained_in_bugs_found():
    lines = explanations()
    explained = {(candidate, clause) for _, _, candidate, patterns in lines
                 for (c, clause) in red_cells() if c == candidate and any(fnmatch.fnmatchcase(clause, p) for p in patterns)}
    left = sorted(red_cells() - explained)
    assert not left, "red cells of docs/conformance.json that docs/bugs-found.md does not explain:\n  " + "\n  ".join(
        f"{c} {k}" for c, k in left)


def test_every_cells_pattern_names_a_red_cell():
    red = red_cells()
    stale = [f"{heading}: `{candidate}` {pattern}" for heading, _, candidate, patterns in explanations()
             for pattern in patterns if not any(c == candidate and fnmatch.fnmatchcase(k, pattern) for c, k in red)]
    assert not stale, "docs/bugs-found.md names cells that are not red in docs/conformance.json:\n  " + "\n  ".join(stale)


def test_a_red_cell_is_a_defect_or_not_a_defect_never_both():
    kinds: dict[tuple[str, str], set[bool]] = {}
    for _, defect, candidate, patterns in explanations():
        for c, k in red_cells():
            if c == candidate and any(fnmatch.fnmatchcase(k, p) for p in patterns):
                kinds.setdefault((c, k), set()).add(defect)
    both = sorted(cell for cell, seen in kinds.items() if len(seen) > 1)
    assert not both, f"cells listed both as a defect and as not a defect: {both}"


def test_every_defect_entry_has_a_reproduction_a_version_and_its_upstream_status():
    sections = re.split(r"^## ", BUGS.read_text(encoding="utf-8"), flags=re.M)[1:]
    entries = [s for s in sections if re.match(r"\d+\.", s)]
    assert entries
    for entry in entries:
        title = entry.splitlines()[0]
        assert "```python" in entry, f"{title}: no reproduction"
        assert "Cells: " in entry, f"{title}: no Cells line"
        assert re.search(r"^Upstream: ", entry, flags=re.M), f"{title}: no 'Upstream:' paragraph"
        assert re.search(r"^Version: ", entry, flags=re.M), f"{title}: no 'Version:' line"


def test_default_status_rule():
    assert default_status("gae", {"gae"}) == "pass"
    assert default_status(["gae", "kl_estimate"], {"gae"}) == "not-provided"


def test_every_defect_entry_names_its_catalogued_bug():
    """Each numbered entry's Version line names its id in spec/bugs.toml (the bug catalogue's R entries
    point back here for their reproductions)."""
    import tomllib

    bugs = {b["id"]: b for b in tomllib.loads((ROOT / "spec" / "bugs.toml").read_text(encoding="utf-8"))["bug"]}
    sections = [s for s in re.split(r"^## ", BUGS.read_text(encoding="utf-8"), flags=re.M)[1:] if re.match(r"\d+\.", s)]
    for entry in sections:
        found = re.search(r"^Version: .*bug catalogue: ([A-HR][0-9]+[a-z]?)\b", entry, flags=re.M)
        assert found, f"{entry.splitlines()[0]}: no 'bug catalogue: ID' on its Version line"
        assert found.group(1) in bugs, f"{entry.splitlines()[0]}: {found.group(1)} is not in spec/bugs.toml"

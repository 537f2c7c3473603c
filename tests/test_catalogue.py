"""The catalogue is the single source: every clause has a check, every check names a clause, every
proof a clause cites exists, every clause has a mutant that proves it can fail, docs are in sync."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import MUTANTS, ROOT, mutant_metadata
from rlspec.checks.cli import markdown_catalogue
from rlspec.checks.protocol import OPERATIONS
from rlspec.checks.registry import load_all
from rlspec.spec import catalogue
from rlspec.spec.catalogue import CatalogueError, _clause
from rlspec.spec.proofs import PROOFS

CLAUSES = catalogue.clauses()
IDS = [c.id for c in CLAUSES]


def test_ids_are_unique():
    assert len(IDS) == len(set(IDS))


@pytest.mark.parametrize("clause", CLAUSES, ids=IDS)
def test_every_clause_has_a_check(clause):
    assert load_all().get(clause.id), f"{clause.id} has no registered check"


def test_every_check_names_a_clause():
    unknown = sorted(set(load_all()) - set(IDS))
    assert not unknown, f"checks registered for clauses not in the catalogue: {unknown}"


@pytest.mark.parametrize("clause", CLAUSES, ids=IDS)
def test_every_clause_names_protocol_operations(clause):
    assert set(clause.operations) <= set(OPERATIONS)


@pytest.mark.parametrize("clause", CLAUSES, ids=IDS)
def test_every_cited_proof_exists(clause):
    assert set(clause.proofs) <= set(PROOFS), f"{clause.id} cites unknown proofs"


def test_every_proof_is_cited_by_a_clause():
    cited = {p for c in CLAUSES for p in c.proofs}
    assert set(PROOFS) <= cited, f"proofs no clause cites: {sorted(set(PROOFS) - cited)}"


@pytest.mark.parametrize("clause", CLAUSES, ids=IDS)
def test_every_clause_has_a_mutant_it_must_catch(clause):
    targets = {c for m in MUTANTS for c in mutant_metadata(m)["clauses"]}
    assert clause.id in targets, f"no mutant in tests/mutants names {clause.id}: nothing proves it can fail"


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.stem for m in MUTANTS])
def test_every_mutant_names_catalogued_clauses_and_a_bug(mutant):
    meta = mutant_metadata(mutant)
    assert set(meta["clauses"]) <= set(IDS)
    assert meta["bug"].strip()


def test_docs_clause_catalogue_is_generated_from_the_catalogue():
    path = ROOT / "docs" / "clauses.md"
    assert path.read_text(encoding="utf-8") == markdown_catalogue(), "regenerate: rlspec list --format markdown > docs/clauses.md"


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"id": "gae-lower", "statement": "s", "sources": [{"seed": "000", "section": "x"}], "operations": ["gae"]}, "UPPER-KEBAB"),
        ({"id": "GAE-X", "statement": "s", "operations": ["gae"]}, "lacks sources"),
        ({"id": "GAE-X", "statement": "s", "sources": [{"seed": "000"}], "operations": ["gae"]}, "a source is"),
        ({"id": "GAE-X", "statement": "s", "sources": [], "operations": ["gae"]}, "at least one source"),
    ],
)
def test_malformed_clauses_are_rejected(raw, message):
    with pytest.raises(CatalogueError, match=message):
        _clause(raw, "gae", "test.toml")


def test_lookup_is_case_insensitive_and_suggests_near_misses():
    assert catalogue.by_id("gae-seed-example").id == "GAE-SEED-EXAMPLE"
    with pytest.raises(KeyError, match="did you mean"):
        catalogue.by_id("GAE-NOPE")


def test_the_catalogue_files_ship_inside_the_package():
    assert (Path(catalogue.__file__).parent / "clauses").is_dir()

"""The catalogue is the single source: every clause has a check, every check names a clause, every
proof a clause cites exists, every clause has a mutant that proves it can fail, docs are in sync."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import MUTANTS, ROOT, mutant_metadata
from rlspec.checks.cli import CHAPTERS_BEGIN, CHAPTERS_END, markdown_bugs, markdown_catalogue, markdown_chapters
from rlspec.checks.runner.protocol import OPERATIONS
from rlspec.checks.runner.chapters import load_all
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


def test_the_chapter_numbers_in_extending_are_generated_from_the_catalogue():
    text = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    start, end = text.index(CHAPTERS_BEGIN), text.index(CHAPTERS_END) + len(CHAPTERS_END) + 1
    assert text[start:end] == markdown_chapters(), \
        "regenerate: replace the block between the markers of docs/extending.md with `rlspec list --format chapters`"


def test_docs_known_bugs_is_generated_from_the_bug_catalogue():
    path = ROOT / "docs" / "known-bugs.md"
    assert path.read_text(encoding="utf-8") == markdown_bugs(), "regenerate: rlspec list --bugs --format markdown > docs/known-bugs.md"


GOOD_SOURCE = {"ref": "gae", "where": "§3, eq. 16"}


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"id": "gae-lower", "statement": "s", "sources": [GOOD_SOURCE], "operations": ["gae"]}, "UPPER-KEBAB"),
        ({"id": "GAE-X", "statement": "s", "operations": ["gae"]}, "lacks sources"),
        ({"id": "GAE-X", "statement": "s", "sources": [{"seed": "000", "section": "x"}], "operations": ["gae"]}, "a source is"),
        ({"id": "GAE-X", "statement": "s", "sources": [], "operations": ["gae"]}, "at least one source"),
        ({"id": "GAE-X", "statement": "s", "sources": [{"ref": "gea"}], "operations": ["gae"]}, "unknown reference 'gea'.*did you mean 'gae'"),
        ({"id": "GAE-X", "statement": "s", "sources": [{"ref": "gae", "page": "3"}], "operations": ["gae"]}, "unknown page"),
        ({"id": "GAE-X", "statement": "s", "sources": [{"ref": "gae", "where": ""}], "operations": ["gae"]}, "where must be a non-empty"),
        ({"id": "GAE-X", "statement": "s", "sources": [{"library": "sb3", "version": "2.9.2", "path": "p.py", "symbol": "f"}],
          "operations": ["gae"]}, "unknown library 'sb3'"),
        ({"id": "GAE-X", "statement": "s", "sources": [{"library": "stable-baselines3", "path": "p.py", "symbol": "f"}],
          "operations": ["gae"]}, "missing version"),
        ({"id": "GAE-X", "statement": "s", "sources": [{"proof": "gae.seed_example"}], "operations": ["gae"]},
         "not among the clause's proofs"),
        ({"id": "GAE-X", "statement": "s", "sources": [GOOD_SOURCE], "operations": ["gae"], "bugs": ["B99"]}, "unknown bug 'B99'"),
        ({"id": "GAE-X", "statement": "s", "sources": [GOOD_SOURCE], "operations": ["gae"],
          "bugs": ["B1 sb3-dones-current-vs-last"]}, "unknown bug"),
    ],
)
def test_malformed_clauses_are_rejected(raw, message):
    with pytest.raises(CatalogueError, match=message):
        _clause(raw, "gae", "test.toml")


def test_a_clause_with_every_source_form_loads():
    clause = _clause({"id": "GAE-X", "statement": "s", "operations": ["gae"], "proofs": ["gae.seed_example"], "bugs": ["B1"],
                      "sources": [GOOD_SOURCE, {"proof": "gae.seed_example"},
                                  {"library": "stable-baselines3", "version": "2.9.2", "path": "stable_baselines3/common/buffers.py",
                                   "symbol": "RolloutBuffer.compute_returns_and_advantage"}]}, "gae", "test.toml")
    paper, proof, code = clause.sources
    assert paper.url == "https://arxiv.org/abs/1506.02438" and "§3, eq. 16" in str(paper)
    assert proof.path == "spec/proofs/gae.py"
    assert code.url == "https://github.com/DLR-RM/stable-baselines3/blob/v2.9.2/stable_baselines3/common/buffers.py"
    assert [b.name for b in clause.bug_entries] == ["sb3-dones-current-vs-last"]


def test_lookup_is_case_insensitive_and_suggests_near_misses():
    assert catalogue.by_id("gae-seed-example").id == "GAE-SEED-EXAMPLE"
    with pytest.raises(KeyError, match="did you mean"):
        catalogue.by_id("GAE-NOPE")


def test_the_catalogue_files_ship_inside_the_package():
    here = Path(catalogue.__file__).parent
    assert (here / "clauses").is_dir() and (here / "references.toml").is_file() and (here / "bugs.toml").is_file()

"""The clause catalogue: one TOML file per chapter in ``spec/clauses/``.

A clause is one checkable statement with a stable id. This module only reads and validates the
data; the command line, the reports, the docs and the tests all read clauses through it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

CLAUSE_DIR = Path(__file__).parent / "clauses"
SEEDS = {
    "000": "000_9704f79125f402a9.txt",
    "001": "001_dbdfbfd7feda9c13.txt",
}
ID_PATTERN = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)+$")
REQUIRED = ("id", "statement", "sources", "operations")


class CatalogueError(ValueError):
    """The catalogue data is malformed (a bug in rlspec itself, not in a candidate)."""


@dataclass(frozen=True)
class Source:
    seed: str  # file name in shared/seeds/ (or "PROBES.md" for research probe cases)
    section: str

    def __str__(self) -> str:
        return f"{self.seed}, {self.section}"


@dataclass(frozen=True)
class Clause:
    id: str
    chapter: str
    statement: str
    sources: tuple[Source, ...]
    operations: tuple[str, ...]
    proofs: tuple[str, ...] = ()
    likely_cause: str = ""
    bugs: tuple[str, ...] = ()  # research/bugs.md entries this clause is meant to catch
    notes: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def operation(self) -> str | list[str]:
        """The JSON report's ``operation``: a name, or a list where the clause uses several."""
        return self.operations[0] if len(self.operations) == 1 else list(self.operations)


@dataclass(frozen=True)
class Chapter:
    name: str
    title: str
    clauses: tuple[Clause, ...]


def _source(raw, where: str) -> Source:
    if not isinstance(raw, dict) or set(raw) != {"seed", "section"}:
        raise CatalogueError(f"{where}: a source is {{seed = ..., section = ...}}, got {raw!r}")
    seed = SEEDS.get(raw["seed"], raw["seed"])
    return Source(seed=seed, section=raw["section"])


def _clause(raw: dict, chapter: str, where: str) -> Clause:
    missing = [key for key in REQUIRED if key not in raw]
    if missing:
        raise CatalogueError(f"{where}: clause {raw.get('id', '?')} lacks {', '.join(missing)}")
    if not ID_PATTERN.match(raw["id"]):
        raise CatalogueError(f"{where}: clause id {raw['id']!r} is not UPPER-KEBAB-CASE")
    known = set(REQUIRED) | {"proofs", "likely_cause", "bugs", "notes"}
    sources = tuple(_source(s, f"{where}: {raw['id']}") for s in raw["sources"])
    if not sources or not raw["operations"]:
        raise CatalogueError(f"{where}: {raw['id']} needs at least one source and one operation")
    return Clause(
        id=raw["id"],
        chapter=chapter,
        statement=" ".join(raw["statement"].split()),
        sources=sources,
        operations=tuple(raw["operations"]),
        proofs=tuple(raw.get("proofs", ())),
        likely_cause=" ".join(raw.get("likely_cause", "").split()),
        bugs=tuple(raw.get("bugs", ())),
        notes=" ".join(raw.get("notes", "").split()),
        extra={k: v for k, v in raw.items() if k not in known},
    )


@lru_cache(maxsize=None)
def chapters() -> tuple[Chapter, ...]:
    """Every chapter, in file-name order, each with its clauses in file order."""
    found = []
    seen: dict[str, str] = {}
    for path in sorted(CLAUSE_DIR.glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        meta = data.get("chapter", {})
        name = meta.get("name", path.stem.split("_", 1)[-1])
        chapter_clauses = []
        for raw in data.get("clause", []):
            clause = _clause(raw, name, path.name)
            if clause.id in seen:
                raise CatalogueError(f"{path.name}: duplicate clause id {clause.id} (also in {seen[clause.id]})")
            seen[clause.id] = path.name
            chapter_clauses.append(clause)
        found.append(Chapter(name=name, title=meta.get("title", name), clauses=tuple(chapter_clauses)))
    return tuple(found)


def clauses() -> tuple[Clause, ...]:
    """Every clause, chapter by chapter."""
    return tuple(c for chapter in chapters() for c in chapter.clauses)


def by_id(clause_id: str) -> Clause:
    """The clause with this id (case-insensitive); ``KeyError`` with the near misses if none."""
    wanted = clause_id.upper()
    for clause in clauses():
        if clause.id == wanted:
            return clause
    close = [c.id for c in clauses() if wanted.split("-")[0] == c.id.split("-")[0]]
    raise KeyError(f"no clause {clause_id!r}" + (f"; did you mean one of {', '.join(close)}?" if close else ""))

"""The clause catalogue: one TOML file per chapter in ``spec/clauses/``, with the works the clauses
cite (``spec/references.toml``) and the real bugs they catch (``spec/bugs.toml``).

A clause is one checkable statement with a stable id. Its sources are what a reader follows to
check it, and every one resolves from a clone of the repository:

* ``{ ref = "gae", where = "§3, eq. 16" }``: a published work in ``references.toml`` (arXiv id or
  URL), and where in it;
* ``{ library = "stable-baselines3", version = "2.9.2", path = "...", symbol = "..." }``: a
  library's code at the version that was read (the library must be in ``references.toml``; the
  tests check the version against the adapter's pin in pyproject.toml);
* ``{ proof = "gae.seed_example" }``: one of rlspec's own SymPy proofs (``spec/proofs/``), which
  the clause must also list in ``proofs``.

A clause's ``bugs`` are ids of ``bugs.toml``. This module only reads and validates the data; the
command line, the reports, the docs and the tests all read clauses through it. It imports no SymPy:
that proof ids exist in ``spec.proofs.PROOFS`` is checked by the tests, not at every start-up.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Union

HERE = Path(__file__).parent
CLAUSE_DIR = HERE / "clauses"
REFERENCES_FILE = HERE / "references.toml"
BUGS_FILE = HERE / "bugs.toml"

ID_PATTERN = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)+$")
BUG_ID_PATTERN = re.compile(r"^[A-IR][0-9]+[a-z]?$")
ARXIV_PATTERN = re.compile(r"^[0-9]{4}\.[0-9]{4,5}$")
REQUIRED = ("id", "statement", "sources", "operations")
BUG_STATUSES = ("fixed", "partly-fixed", "open", "by-design", "disputed", "unconfirmed", "hazard")
SOURCE_FORMS = "{ref = KEY, where = ...}, {library = NAME, version = ..., path = ..., symbol = ...} or {proof = ID}"


class CatalogueError(ValueError):
    """The catalogue data is malformed (a bug in rlspec itself, not in a candidate)."""


def _nearest(word: str, choices) -> str:
    import difflib  # only on the error path

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _check_keys(raw, required: set, optional: set, where: str) -> None:
    if not isinstance(raw, dict):
        raise CatalogueError(f"{where}: expected a table, got {raw!r}")
    missing = sorted(required - set(raw))
    unknown = sorted(set(raw) - required - optional)
    if missing or unknown:
        problems = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(unknown)}{_nearest(unknown[0], required | optional)}"] if unknown else [])
        raise CatalogueError(f"{where}: {'; '.join(problems)}")
    for key, value in raw.items():
        if key not in ("year", "links", "related") and not (isinstance(value, str) and value.strip()):
            raise CatalogueError(f"{where}: {key} must be a non-empty string, got {value!r}")


# ------------------------------------------------------------------------------------------------
# References and libraries


@dataclass(frozen=True)
class Reference:
    """A published work a clause cites: a paper, a book, a blog note."""

    key: str
    authors: str
    title: str
    venue: str
    year: int
    arxiv: str = ""
    url: str = ""

    @property
    def link(self) -> str:
        return f"https://arxiv.org/abs/{self.arxiv}" if self.arxiv else self.url

    @property
    def short(self) -> str:
        """``Schulman et al. 2017``, ``Russell & Norvig 2010``, ``Williams 1992``."""
        names = [n.strip() for n in self.authors.split(",")]
        surname = lambda name: name.replace(" et al.", "").split()[-1]
        if len(names) == 1 and " et al." not in names[0]:
            who = surname(names[0])
        elif len(names) == 2:
            who = f"{surname(names[0])} & {surname(names[1])}"
        else:
            who = f"{surname(names[0])} et al."
        return f"{who} {self.year}"

    def __str__(self) -> str:
        ident = f"arXiv:{self.arxiv}" if self.arxiv else self.url
        return f"{self.authors}, \"{self.title}\", {self.venue}, {self.year}. {ident}"


@dataclass(frozen=True)
class Library:
    """A library whose code a clause cites at a version (one of rlspec's adapters)."""

    name: str
    repository: str
    tag: str = ""  # the repository's tag for a version, e.g. "v{version}"; "" when not known

    def url(self, version: str, path: str) -> str:
        if not self.tag:
            return ""
        return f"{self.repository}/blob/{self.tag.format(version=version)}/{path}"


def _reference(raw, where: str) -> Reference:
    _check_keys(raw, {"key", "authors", "title", "venue", "year"}, {"arxiv", "url"}, where)
    if not isinstance(raw["year"], int):
        raise CatalogueError(f"{where}: year must be an integer, got {raw['year']!r}")
    if not raw.get("arxiv") and not raw.get("url"):
        raise CatalogueError(f"{where}: reference {raw['key']} needs an arxiv id or a url")
    if raw.get("arxiv") and not ARXIV_PATTERN.match(raw["arxiv"]):
        raise CatalogueError(f"{where}: {raw['key']}: arxiv is the bare identifier (1506.02438), got {raw['arxiv']!r}")
    if raw.get("url") and not raw["url"].startswith(("https://", "http://")):
        raise CatalogueError(f"{where}: {raw['key']}: url must be http(s), got {raw['url']!r}")
    return Reference(**raw)


def _library(raw, where: str) -> Library:
    _check_keys(raw, {"name", "repository"}, {"tag"}, where)
    if raw.get("tag") and "{version}" not in raw["tag"]:
        raise CatalogueError(f"{where}: {raw['name']}: tag must contain {{version}}, got {raw['tag']!r}")
    return Library(**raw)


@lru_cache(maxsize=None)
def _references_data() -> tuple[dict[str, Reference], dict[str, Library]]:
    data = tomllib.loads(REFERENCES_FILE.read_text(encoding="utf-8"))
    unknown = set(data) - {"reference", "library"}
    if unknown:
        raise CatalogueError(f"{REFERENCES_FILE.name}: unknown tables {sorted(unknown)}")
    refs: dict[str, Reference] = {}
    for raw in data.get("reference", []):
        ref = _reference(raw, f"{REFERENCES_FILE.name}: reference {raw.get('key', '?')}")
        if ref.key in refs:
            raise CatalogueError(f"{REFERENCES_FILE.name}: duplicate reference key {ref.key}")
        refs[ref.key] = ref
    libs: dict[str, Library] = {}
    for raw in data.get("library", []):
        lib = _library(raw, f"{REFERENCES_FILE.name}: library {raw.get('name', '?')}")
        if lib.name in libs:
            raise CatalogueError(f"{REFERENCES_FILE.name}: duplicate library {lib.name}")
        libs[lib.name] = lib
    return refs, libs


def references() -> dict[str, Reference]:
    """Every published work the catalogue may cite, by key, in file order."""
    return _references_data()[0]


def libraries() -> dict[str, Library]:
    """Every library whose code the catalogue may cite, by name."""
    return _references_data()[1]


# ------------------------------------------------------------------------------------------------
# Sources


@dataclass(frozen=True)
class PaperSource:
    """A passage of a published work: ``{ref = KEY, where = ...}``."""

    reference: Reference
    where: str = ""
    kind = "ref"

    @property
    def url(self) -> str:
        return self.reference.link

    def as_dict(self) -> dict:
        return {"ref": self.reference.key, **({"where": self.where} if self.where else {})}

    def __str__(self) -> str:
        ident = f"arXiv:{self.reference.arxiv}" if self.reference.arxiv else self.reference.url
        where = f", {self.where}" if self.where else ""
        return f"{self.reference.short}, \"{self.reference.title}\"{where} ({ident})"


@dataclass(frozen=True)
class CodeSource:
    """A library's code at the version read: ``{library, version, path, symbol}``."""

    library: str
    version: str
    path: str
    symbol: str
    kind = "library"

    @property
    def url(self) -> str:
        return libraries()[self.library].url(self.version, self.path)

    def as_dict(self) -> dict:
        return {"library": self.library, "version": self.version, "path": self.path, "symbol": self.symbol}

    def __str__(self) -> str:
        return f"{self.library} {self.version}, {self.path}: {self.symbol}"


@dataclass(frozen=True)
class ProofSource:
    """One of rlspec's own SymPy proofs: ``{proof = ID}`` (module.function in spec/proofs)."""

    proof: str
    kind = "proof"

    @property
    def path(self) -> str:
        return f"spec/proofs/{self.proof.split('.')[0]}.py"

    @property
    def url(self) -> str:
        return ""  # in the repository itself: ``path``

    def as_dict(self) -> dict:
        return {"proof": self.proof}

    def __str__(self) -> str:
        return f"rlspec proof {self.proof} ({self.path})"


Source = Union[PaperSource, CodeSource, ProofSource]


def _source(raw, where: str, proofs: tuple[str, ...]) -> Source:
    if not isinstance(raw, dict):
        raise CatalogueError(f"{where}: a source is {SOURCE_FORMS}, got {raw!r}")
    if "ref" in raw:
        _check_keys(raw, {"ref"}, {"where"}, f"{where}: source {raw!r}")
        refs = references()
        if raw["ref"] not in refs:
            raise CatalogueError(f"{where}: unknown reference {raw['ref']!r} (not in {REFERENCES_FILE.name})"
                                 f"{_nearest(raw['ref'], refs)}")
        return PaperSource(refs[raw["ref"]], raw.get("where", ""))
    if "library" in raw:
        _check_keys(raw, {"library", "version", "path", "symbol"}, set(), f"{where}: source {raw!r}")
        if raw["library"] not in libraries():
            raise CatalogueError(f"{where}: unknown library {raw['library']!r} (not in {REFERENCES_FILE.name})"
                                 f"{_nearest(raw['library'], libraries())}")
        return CodeSource(raw["library"], raw["version"], raw["path"], raw["symbol"])
    if "proof" in raw:
        _check_keys(raw, {"proof"}, set(), f"{where}: source {raw!r}")
        if raw["proof"] not in proofs:
            raise CatalogueError(f"{where}: source proof {raw['proof']!r} is not among the clause's proofs {list(proofs)}")
        return ProofSource(raw["proof"])
    raise CatalogueError(f"{where}: a source is {SOURCE_FORMS}, got {raw!r}")


# ------------------------------------------------------------------------------------------------
# Bugs


@dataclass(frozen=True)
class Bug:
    """A real mistake in public policy-gradient code, with where it was reported."""

    id: str
    name: str
    library: str
    mechanism: str
    status: str
    links: tuple[str, ...]
    fixed_in: str = ""
    version: str = ""
    code: str = ""
    related: tuple[str, ...] = ()

    @property
    def found_by_rlspec(self) -> bool:
        return self.id.startswith("R")

    def __str__(self) -> str:
        return f"{self.id} {self.name} ({self.library}{' ' + self.version if self.version else ''}; {self.status})"


def _bug(raw, where: str) -> Bug:
    _check_keys(raw, {"id", "name", "library", "mechanism", "status", "links"},
                {"fixed_in", "version", "code", "related"}, where)
    if not BUG_ID_PATTERN.match(raw["id"]):
        raise CatalogueError(f"{where}: bug id {raw['id']!r} is a letter A-I or R, a number and an optional letter (D7a)")
    if raw["status"] not in BUG_STATUSES:
        raise CatalogueError(f"{where}: status {raw['status']!r} is not one of {', '.join(BUG_STATUSES)}"
                             f"{_nearest(raw['status'], BUG_STATUSES)}")
    links = raw["links"]
    if not isinstance(links, list) or not all(isinstance(u, str) and u.startswith("https://") for u in links):
        raise CatalogueError(f"{where}: links is a list of https URLs, got {links!r}")
    if not links and not (raw["id"].startswith("R") or raw["status"] == "hazard"):
        raise CatalogueError(f"{where}: a bug reported upstream needs its links (only R entries and hazards have none)")
    if not links and not raw.get("code"):
        raise CatalogueError(f"{where}: a bug with no upstream link needs `code`, the code it was read in")
    if raw["id"].startswith("R") and not (raw.get("version") and raw.get("code")):
        raise CatalogueError(f"{where}: an R entry names the version and the code rlspec read (version, code)")
    related = raw.get("related", [])
    if not isinstance(related, list) or not all(isinstance(r, str) for r in related):
        raise CatalogueError(f"{where}: related is a list of bug ids, got {related!r}")
    return Bug(**{**raw, "links": tuple(links), "related": tuple(related)})


@lru_cache(maxsize=None)
def bugs() -> dict[str, Bug]:
    """The bug catalogue by id, in file order."""
    data = tomllib.loads(BUGS_FILE.read_text(encoding="utf-8"))
    if set(data) - {"bug"}:
        raise CatalogueError(f"{BUGS_FILE.name}: unknown tables {sorted(set(data) - {'bug'})}")
    found: dict[str, Bug] = {}
    for raw in data.get("bug", []):
        bug = _bug(raw, f"{BUGS_FILE.name}: bug {raw.get('id', '?') if isinstance(raw, dict) else '?'}")
        if bug.id in found:
            raise CatalogueError(f"{BUGS_FILE.name}: duplicate bug id {bug.id}")
        found[bug.id] = bug
    for bug in found.values():
        for other in bug.related:
            if other not in found:
                raise CatalogueError(f"{BUGS_FILE.name}: bug {bug.id} relates to unknown bug {other!r}")
    return found


def bug(bug_id: str) -> Bug:
    """The catalogued bug with this id; ``KeyError`` naming the nearest id if none."""
    table = bugs()
    if bug_id not in table:
        raise KeyError(f"no bug {bug_id!r} in {BUGS_FILE.name}{_nearest(bug_id, table)}")
    return table[bug_id]


# ------------------------------------------------------------------------------------------------
# Clauses


@dataclass(frozen=True)
class Clause:
    id: str
    chapter: str
    statement: str
    sources: tuple[Source, ...]
    operations: tuple[str, ...]
    proofs: tuple[str, ...] = ()
    likely_cause: str = ""
    bugs: tuple[str, ...] = ()  # ids in spec/bugs.toml that this clause is meant to catch
    notes: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    # argument -> why this clause's fixed cases do not take the argument's contract edges (the statement fixes it, the
    # clause's bound is derived for a part of the range); tests/test_edges.py holds every other varied argument to them
    no_edges: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def operation(self) -> str | list[str]:
        """The JSON report's ``operation``: a name, or a list where the clause uses several."""
        return self.operations[0] if len(self.operations) == 1 else list(self.operations)

    @property
    def bug_entries(self) -> tuple[Bug, ...]:
        return tuple(bug(b) for b in self.bugs)


@dataclass(frozen=True)
class Chapter:
    name: str
    title: str
    clauses: tuple[Clause, ...]


def _clause(raw: dict, chapter: str, where: str) -> Clause:
    missing = [key for key in REQUIRED if key not in raw]
    if missing:
        raise CatalogueError(f"{where}: clause {raw.get('id', '?')} lacks {', '.join(missing)}")
    if not ID_PATTERN.match(raw["id"]):
        raise CatalogueError(f"{where}: clause id {raw['id']!r} is not UPPER-KEBAB-CASE")
    known = set(REQUIRED) | {"proofs", "likely_cause", "bugs", "notes", "no_edges"}
    no_edges = raw.get("no_edges", {})
    if not isinstance(no_edges, dict) or not all(isinstance(v, str) and v.strip() for v in no_edges.values()):
        raise CatalogueError(f"{where}: {raw['id']}: no_edges is a table of argument = \"why its edges are not taken\"")
    proofs = tuple(raw.get("proofs", ()))
    sources = tuple(_source(s, f"{where}: {raw['id']}", proofs) for s in raw["sources"])
    if not sources or not raw["operations"]:
        raise CatalogueError(f"{where}: {raw['id']} needs at least one source and one operation")
    clause_bugs = tuple(raw.get("bugs", ()))
    table = bugs()
    for bug_id in clause_bugs:
        if bug_id not in table:
            raise CatalogueError(f"{where}: {raw['id']} cites unknown bug {bug_id!r} (not in {BUGS_FILE.name})"
                                 f"{_nearest(bug_id, table)}")
    return Clause(
        id=raw["id"],
        chapter=chapter,
        statement=" ".join(raw["statement"].split()),
        sources=sources,
        operations=tuple(raw["operations"]),
        proofs=proofs,
        likely_cause=" ".join(raw.get("likely_cause", "").split()),
        bugs=clause_bugs,
        notes=" ".join(raw.get("notes", "").split()),
        extra={k: v for k, v in raw.items() if k not in known},
        no_edges={k: " ".join(v.split()) for k, v in no_edges.items()},
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


def catalogued_bugs_cited() -> dict[str, tuple[str, ...]]:
    """bug id -> the clauses that cite it (every catalogued bug, cited or not)."""
    cited: dict[str, list[str]] = {b: [] for b in bugs()}
    for clause in clauses():
        for b in clause.bugs:
            cited[b].append(clause.id)
    return {b: tuple(ids) for b, ids in cited.items()}

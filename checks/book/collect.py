"""What the book's pages say, gathered as data from the project's one home for each fact.

Nothing here renders HTML; :mod:`.pages` does. Every text that comes from a candidate or a library
(messages, counterexamples, version strings, descriptions) is kept verbatim here and escaped there.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ...spec import catalogue
from ..matrix import bugs_found as bugs_found_lines
from ..matrix import history as history_mod
from . import markdown



class BookError(ValueError):
    """An input the book cannot read (one line for the command line)."""


# ------------------------------------------------------------------------------------------------
# the matrix: one column per candidate


@dataclass
class Column:
    candidate: str  # "torchrl:vec_gae"
    adapter: str  # "torchrl"
    variant: str | None
    version: str
    description: str
    xfail: dict
    conventions: dict
    results: dict[str, dict]  # clause id -> the run's result for it
    origin: str  # "matrix" or the run JSON it came from

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9_-]+", "-", self.candidate.lower()).strip("-") or "candidate"

    @property
    def is_library(self) -> bool:
        """A library's own column (its defaults), as opposed to a variant or a user's run."""
        return self.origin == "matrix" and self.variant is None


def _str(value) -> str:
    return "" if value is None else str(value)


def matrix_columns(matrix: dict) -> list[Column]:
    columns = []
    for report in matrix.get("adapters", []):
        for c in report.get("candidates", []):
            columns.append(Column(
                candidate=_str(c.get("candidate")), adapter=_str(c.get("adapter", report.get("adapter"))),
                variant=c.get("variant"), version=_str(c.get("version")), description=_str(c.get("description")),
                xfail=dict(c.get("xfail") or {}), conventions=dict(c.get("conventions") or {}),
                results={r["id"]: r for r in c.get("run", {}).get("clauses", []) if isinstance(r, dict) and "id" in r},
                origin="matrix"))
    return columns


def run_column(path: Path) -> Column:
    """A column from ``rlspec check --json``: a candidate beside the libraries."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        results = {r["id"]: r for r in data["clauses"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BookError(f"--json {path}: not an rlspec check report ({type(exc).__name__}: {exc})") from None
    name = _str(data.get("candidate")) or Path(path).stem
    return Column(candidate=name, adapter=name, variant=None, version=_str(data.get("version", "")),
                  description=f"rlspec check --json {Path(path).name} (profile {_str(data.get('profile'))}, seed {_str(data.get('seed'))})",
                  xfail={}, conventions={}, results=results, origin=str(path))


def read_matrix(path: Path | None) -> dict:
    if path is None:
        return {"adapters": []}
    try:
        matrix = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise BookError(f"--matrix {path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise BookError(f"--matrix {path}: not JSON ({exc})") from None
    if not isinstance(matrix, dict) or not isinstance(matrix.get("adapters"), list):
        raise BookError(f"--matrix {path}: not a conformance matrix (rlspec matrix writes docs/conformance.json)")
    return matrix


# ------------------------------------------------------------------------------------------------
# mutants, vectors, reference source


@dataclass
class Mutant:
    name: str
    path: Path
    clauses: tuple[str, ...]
    bug: str
    summary: str
    source: str

    @property
    def bug_ids(self) -> tuple[str, ...]:
        """Catalogued bug ids the ``bug`` string names (``"B1 sb3-dones-..."``)."""
        known = catalogue.bugs()
        return tuple(dict.fromkeys(w for w in re.findall(r"\b[A-GR][0-9]+[a-z]?\b", self.bug) if w in known))


def _summary(doc: str) -> str:
    """The docstring's first paragraph, without the leading ``Mutant:``."""
    first = doc.strip().split("\n\n")[0]
    text = " ".join(first.split())
    return re.sub(r"^Mutant\s*(\([^)]*\))?\s*:\s*", "", text)


def mutants(folder: Path) -> list[Mutant]:
    """Every ``tests/mutants/*.py`` with its ``RLSPEC_MUTANT``, read without running it."""
    found = []
    for path in sorted(Path(folder).glob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, str(path))
        meta = None
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "RLSPEC_MUTANT" for t in node.targets):
                meta = ast.literal_eval(node.value)
        if not isinstance(meta, dict) or "clauses" not in meta:
            raise BookError(f"{path}: a mutant declares RLSPEC_MUTANT = {{'clauses': [...], 'bug': ...}}")
        found.append(Mutant(path.stem, path, tuple(meta["clauses"]), str(meta.get("bug", "")),
                            _summary(ast.get_docstring(tree) or ""), source))
    return found


def vector_cases(folder: Path) -> tuple[dict[str, list[dict]], list[Path]]:
    """clause id -> the known-answer vectors that check it (with their file), and the vector files."""
    by_clause: dict[str, list[dict]] = {}
    files = []
    if not Path(folder).is_dir():
        return by_clause, files
    for path in sorted(Path(folder).glob("*.json")):
        if path.name in ("manifest.json", "schema.json"):
            files.append(path)
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        files.append(path)
        for case in data.get("cases", []):
            for clause_id in case.get("clauses", []):
                by_clause.setdefault(clause_id, []).append({**case, "file": path.name})
    return by_clause, files


def reference_sources(operations) -> dict[str, dict]:
    """operation -> {"qualname", "path", "source"} of the reference implementation the suite runs."""
    from ..runner import reference_candidate

    root = Path(catalogue.__file__).resolve().parents[1]
    found = {}
    for op in operations:
        function = getattr(reference_candidate, op, None)
        if function is None:
            continue
        try:
            path = Path(inspect.getsourcefile(function)).resolve()
            shown = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
            found[op] = {"qualname": f"{function.__module__}.{function.__name__}", "path": shown,
                         "line": inspect.getsourcelines(function)[1], "source": inspect.getsource(function)}
        except (OSError, TypeError):
            continue
    return found


# ------------------------------------------------------------------------------------------------
# docs/bugs-found.md


@dataclass
class Defect:
    """One entry of docs/bugs-found.md (a numbered defect, or the "Not a defect" section): where it is and which
    matrix cells (candidate, clause pattern) its ``Cells:`` lines say it explains."""

    anchor: str
    title: str
    explains: list = field(default_factory=list)  # checks.matrix.bugs_found.Explanation
    defect: bool = True

    @property
    def adapters(self) -> set[str]:
        return {x.candidate for x in self.explains}


@dataclass
class BugsFound:
    html: str
    defects: list[Defect]
    how: str = "Cells lines"

    def explaining(self, clause_id: str, column: Column) -> list[Defect]:
        return [d for d in self.defects if any(x.covers(column.candidate, clause_id) for x in d.explains)]


def bugs_found(path: Path, columns: list[Column], links) -> BugsFound | None:
    """docs/bugs-found.md as HTML and its entries, each with the cells its ``Cells:`` lines name
    (``checks.matrix.bugs_found``, the one reader of that format); None if there is no such file."""
    if path is None or not Path(path).is_file():
        return None
    text = Path(path).read_text(encoding="utf-8")
    rendered = markdown.render(text, links)
    anchors = {h_text: h_id for level, h_id, h_text in rendered.headings if level == 2}
    try:
        found = bugs_found_lines.explanations(text)
    except ValueError as exc:
        raise BookError(str(exc)) from None
    entries: dict[str, Defect] = {}
    for x in found:
        title = markdown.plain(x.heading)  # the heading as rendered: a title with `code` or [links] keeps its id
        if title not in anchors:
            raise BookError(f"bugs-found.md: the Cells line of {x.heading!r} is under no level-2 heading the book can link to")
        entry = entries.setdefault(x.heading, Defect(anchors[title], title, [], x.defect))
        entry.explains.append(x)
    return BugsFound(rendered.html, list(entries.values()))


# ------------------------------------------------------------------------------------------------
# studies


def studies(folder: Path | None) -> list[dict]:
    """The results ``rlspec study --out DIR`` wrote: ``DIR/NAME.json`` naming the chapter and clauses it illustrates."""
    if folder is None:
        return []
    folder = Path(folder)
    if not folder.is_dir():
        raise BookError(f"--studies {folder}: no such folder (rlspec study all --out DIR writes one)")
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise BookError(f"--studies: {path} is not JSON ({exc})") from None
        if not isinstance(data, dict) or "study" not in data or not isinstance(data.get("illustrates"), dict):
            continue  # not a study result
        figure = folder / data["figure"] if data.get("figure") else None
        found.append({**data, "_figure_path": figure if figure and figure.is_file() else None, "_file": path.name})
    return found


# ------------------------------------------------------------------------------------------------
# history


def history(folder: Path | None) -> dict[str, list[dict]]:
    """adapter -> its release history: the records of one run configuration (``history.series``: the profile and
    seed most of them share), oldest release first."""
    try:
        loaded = history_mod.load(folder) if folder is not None else {}
    except history_mod.HistoryError as exc:
        raise BookError(str(exc)) from None
    return {adapter: history_mod.series(records) for adapter, records in loaded.items()}


def release_indexes(folder: Path | None) -> dict[str, dict]:
    """adapter -> its ``releases.json`` (every release tried by ``rlspec matrix --releases``)."""
    from ..matrix.releases import load_indexes

    return load_indexes(folder) if folder is not None else {}

"""``rlspec book OUT/``: gather, derive, render, write.

The proofs and the figures are the slow part (SymPy, matplotlib); they run in worker processes
forked first, while this process reads everything else and imports the checks. The book is built
from an rlspec checkout (``tests/mutants``, ``vectors/``, ``docs/``), like ``rlspec vectors``.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ...spec import catalogue
from . import collect, derive
from .collect import BookError

ROOT = Path(catalogue.__file__).resolve().parents[1]  # a checkout's root
DEFAULT_MATRIX = ROOT / "docs" / "conformance.json"
DEFAULT_HISTORY = ROOT / "docs" / "matrix-history"
DEFAULT_BUGS_FOUND = ROOT / "docs" / "bugs-found.md"
DEFAULT_MUTANTS = ROOT / "tests" / "mutants"
DEFAULT_VECTORS = ROOT / "vectors"
MARKER = ".rlspec-book"  # a folder holding this is one the book may overwrite
ASSETS = ("book.css", "book.js", "dashboard.js", "diff.js")

# Where each figure of checks/book/figures.py belongs, and what it shows (the claims come from the figure module).
FIGURES = (
    {"file": "ppo_clip_objective.png", "chapter": "ppo",
     "title": "The clipped objective min(r A, clip(r, 1 - eps, 1 + eps) A) of one sample against the ratio r.",
     "caption": "Shaded: where its gradient is zero, computed with autograd through the reference ppo_clip_loss."},
    {"file": "gae_bias_variance.png", "chapter": "gae",
     "title": "Bias and variance of the GAE advantage at the gridworld's start state against lambda.",
     "caption": "Exact critic and a scaled critic, in closed form by dynamic programming (no sampling)."},
)


@dataclass
class Summary:
    out: Path
    pages: int
    seconds: float
    proofs: dict[str, str]  # id -> verdict
    unexplained: list[tuple[str, str]] = field(default_factory=list)  # (clause, candidate) FAILs with no bugs-found entry
    figures: int = 0
    studies: int = 0
    bugs_found: str = ""  # how the defects were read ("Cells lines"), or "" (no file)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(v == "proved" for v in self.proofs.values())


def draw_figures(folder: str) -> list[dict]:
    """Worker task: draw checks/book/figures.py's figures into ``folder``; their claims, checked."""
    try:
        from .figures import write_figures
    except ImportError as exc:  # matplotlib is the figures extra
        return [{"error": f"figures need matplotlib ({exc})"}]
    paths, claims, _ = write_figures(folder)
    names = {p.name for p in paths}
    by_file = {"ppo_clip_objective.png": [c for c in claims if c[0].startswith("A = ")],
               "gae_bias_variance.png": [c for c in claims if not c[0].startswith("A = ")]}
    return [{**f, "claims": by_file.get(f["file"], [])} for f in FIGURES if f["file"] in names]


def _prepare(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise BookError(f"{out} is a file; rlspec book writes a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise BookError(f"{out} is not empty and is not a book rlspec wrote; choose an empty or new folder")
    if out.is_dir():
        for name in ("clauses", "chapters", "figures", "assets", "vectors"):
            shutil.rmtree(out / name, ignore_errors=True)
        for old in out.glob("*.html"):
            old.unlink()
    (out / "clauses").mkdir(parents=True, exist_ok=True)
    (out / "chapters").mkdir(exist_ok=True)
    (out / "figures").mkdir(exist_ok=True)
    (out / "assets").mkdir(exist_ok=True)
    (out / MARKER).write_text("written by rlspec book; the folder is replaced on the next build\n", encoding="utf-8")


def _links(columns):
    """A relative link of docs/*.md, as the book's page (or None: dropped to text)."""
    pages = {"conformance.md": "dashboard.html", "known-bugs.md": "bugs.html", "clauses.md": "index.html",
             "contract.md": "contract.html", "bugs-found.md": "bugs-found.html"}
    clause_ids = sorted((c.id.lower() for c in catalogue.clauses()), key=len, reverse=True)

    def link(url: str):
        path, _, fragment = url.partition("#")
        name = Path(path).name
        if name == "conformance.md" and fragment:
            for clause_id in clause_ids:  # conformance.md#CANDIDATE-CLAUSE: the verdict on the clause page
                if fragment.endswith("-" + clause_id):
                    slug = fragment[: -len(clause_id) - 1]
                    column = next((c for c in columns if c.candidate.replace(":", "-").lower() == slug), None)
                    if column is not None:
                        return f"clauses/{clause_id.upper()}.html#v-{column.slug}"
        if name in pages:
            return pages[name] + (f"#{fragment}" if fragment else "")
        return None

    return link


def build(out, *, matrix: Path | None = DEFAULT_MATRIX, history: Path | None = DEFAULT_HISTORY,
          bugs_found: Path | None = DEFAULT_BUGS_FOUND, runs=(), mutants: Path | None = DEFAULT_MUTANTS,
          vectors: Path | None = DEFAULT_VECTORS, studies: Path | None = None, figures: bool = True,
          jobs: int | None = None, progress=lambda text: None) -> Summary:
    """Write the book into ``out``. ``mutants=None`` builds without the mutant catalogue (pages say so)."""
    started = time.perf_counter()
    out = Path(out)
    if mutants is not None and not Path(mutants).is_dir():
        raise BookError(f"no mutant catalogue at {mutants} (the book is built from an rlspec checkout; --no-mutants builds without it)")
    _prepare(out)
    from ...spec.proofs import PROOFS

    proof_ids = list(PROOFS)
    pool = derive.pool(jobs)
    try:
        # the figures first: the longest task, then the proofs (the workers fork now, before torch is imported)
        figure_future = pool.submit(draw_figures, str(out / "figures")) if pool is not None and figures else None
        futures = derive.submit(pool, proof_ids)
        progress(f"deriving {len(proof_ids)} proofs on {jobs or derive.default_jobs()} processes")

        # meanwhile: everything else
        from . import contract_docs
        from ..runner.chapters import load_all
        from ...spec import contract
        from . import dashboard, markdown, pages
        from .html import page as frame, script_json

        matrix_data = collect.read_matrix(matrix)
        columns = collect.matrix_columns(matrix_data) + [collect.run_column(Path(r)) for r in runs]
        seen = {}
        for column in columns:
            if column.slug in seen:
                raise BookError(f"two columns named {column.candidate!r} (from {seen[column.slug]} and {column.origin})")
            seen[column.slug] = column.origin
        history_data = collect.history(history)  # each adapter's release history: one run configuration (history.series)
        release_indexes = collect.release_indexes(history)
        found = collect.bugs_found(bugs_found, columns, _links(columns))
        mutant_list = collect.mutants(Path(mutants)) if mutants is not None else []
        vector_cases, vector_files = collect.vector_cases(Path(vectors)) if vectors is not None else ({}, [])
        study_list = collect.studies(Path(studies) if studies is not None else None)
        reference = collect.reference_sources(contract.operations())
        checks = load_all()
        library_values = {}
        for column in columns:
            if column.is_library:
                for key, value in column.conventions.items():
                    library_values.setdefault(key, {})[column.adapter] = value

        drawn = draw_figures(str(out / "figures")) if figures and figure_future is None else (figure_future.result() if figure_future else [])
        notes = [d["error"] for d in drawn if "error" in d]
        drawn = [d for d in drawn if "error" not in d]
        proofs = derive.finish(pool, futures, proof_ids)
        progress(f"proofs derived at {time.perf_counter() - started:.1f} s")

    except BaseException:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        raise

    book = pages.Book(chapters=catalogue.chapters(), proofs=proofs, reference=reference, checks=checks, mutants=mutant_list,
                      vectors=vector_cases, columns=columns, matrix=matrix_data, history=history_data, bugs_found=found,
                      figures=drawn, studies=study_list, library_values=library_values, releases=release_indexes)
    written = 0

    def write(relative: str, text: str) -> None:
        nonlocal written
        (out / relative).write_text(text, encoding="utf-8")
        written += relative.endswith(".html")

    write("index.html", pages.index_page(book))
    for chapter in book.chapters:
        write(f"chapters/{chapter.name}.html", pages.chapter_page(book, chapter))
    for clause in book.clauses:
        write(f"clauses/{clause.id}.html", pages.clause_page(book, clause))
    write("dashboard.html", dashboard.dashboard_page(book))
    write("history.html", dashboard.history_page(book))
    write("diff.html", dashboard.diff_page(book))
    write("bugs.html", pages.bugs_page(book))
    write("works.html", pages.works_page(book))
    contract_md = contract_docs.markdown(Path(matrix) if matrix is not None else None)
    write("contract.html", pages.markdown_page("Contract", markdown.render(contract_md, _links(columns)).html, "contract.html"))
    if found is not None:
        write("bugs-found.html", pages.markdown_page("Defects found", found.html, "bugs-found.html"))
    else:
        write("bugs-found.html", frame("Defects found", "<h1>Defects found</h1><p class=\"muted\">No docs/bugs-found.md was given to this build.</p>",
                                       active="bugs-found.html"))
    for name in ASSETS:
        (out / "assets" / name).write_bytes(resources.files(__package__).joinpath("assets", name).read_bytes())
    write("assets/search-index.js", f"window.RLSPEC_SEARCH = {script_json(pages.search_index(book))};\n")
    write("assets/diff-data.js", dashboard.diff_data_script(book))
    if vector_files:
        (out / "vectors").mkdir(exist_ok=True)
        for path in vector_files:
            shutil.copyfile(path, out / "vectors" / path.name)
    if any(s.get("_figure_path") for s in study_list):
        (out / "figures" / "studies").mkdir(exist_ok=True)
        for s in study_list:
            if s.get("_figure_path"):
                shutil.copyfile(s["_figure_path"], out / "figures" / "studies" / s["figure"])

    names = {ch.name for ch in book.chapters}
    notes += [f"study {s['study']} names chapter {s['illustrates'].get('chapter')!r}, which the catalogue lacks: not embedded"
              for s in study_list if s["illustrates"].get("chapter") not in names]
    unexplained = []
    if found is not None:
        for column in columns:
            for clause_id, result in column.results.items():
                if result.get("status") == "fail" and not found.explaining(clause_id, column):
                    unexplained.append((clause_id, column.candidate))
    return Summary(out=out, pages=written, seconds=time.perf_counter() - started,
                   proofs={p: d["status"] for p, d in proofs.items()}, unexplained=unexplained, figures=len(drawn),
                   studies=len(study_list), bugs_found=found.how if found else "", notes=notes)

"""Sources a reader can follow: every clause's sources resolve from a clone of the repository.

A source is a published work in spec/references.toml, a library's code at the version the adapters
pin, or one of rlspec's proofs; the bugs clauses cite are in spec/bugs.toml with their upstream
links; and no file of the project refers to documents outside the repository.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from conftest import MUTANTS, ROOT, mutant_metadata
from rlspec.spec import catalogue
from rlspec.spec.catalogue import BUG_ID_PATTERN, CodeSource, PaperSource, ProofSource
from rlspec.spec.proofs import PROOFS

CLAUSES = catalogue.clauses()
IDS = [c.id for c in CLAUSES]
CODE_SOURCES = sorted({s for c in CLAUSES for s in c.sources if isinstance(s, CodeSource)}, key=str)


def pinned_versions() -> dict[str, str]:
    """Library -> the version its adapter is pinned to: pyproject's extras (``name~=X``) and the
    install scripts of the libraries installed with --no-deps (``"name==X"``, or the script's own library at
    ``${RLSPEC_RELEASE:-X}``)."""
    pins = {}
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for requirements in extras.values():
        for requirement in requirements:
            m = re.match(r"^([A-Za-z0-9_.-]+)\s*(?:~=|==)\s*([0-9][0-9.]*)", requirement)
            if m:
                pins[m.group(1).lower()] = m.group(2)
    for script in sorted((ROOT / ".ci" / "install").glob("*.sh")):
        text = script.read_text(encoding="utf-8")
        for name, version in re.findall(r'"([A-Za-z0-9_.-]+)==([0-9][0-9.]*)"', text):
            pins[name.lower()] = version
        # the library the script is named after, at its default release (rlspec matrix --releases overrides it)
        for version in re.findall(r"\$\{RLSPEC_RELEASE:-([0-9][0-9.]*)\}", text):
            pins[script.stem.lower()] = version
    return pins


@pytest.mark.parametrize("clause", CLAUSES, ids=IDS)
def test_every_clause_cites_work_outside_its_own_proofs(clause):
    outside = [s for s in clause.sources if isinstance(s, (PaperSource, CodeSource))]
    assert outside, f"{clause.id} cites only rlspec's proofs: add the paper whose formula it exercises"


@pytest.mark.parametrize("clause", CLAUSES, ids=IDS)
def test_proof_sources_exist(clause):
    for source in clause.sources:
        if isinstance(source, ProofSource):
            assert source.proof in PROOFS, f"{clause.id} cites unknown proof {source.proof}"
            assert (ROOT / source.path).is_file(), f"{clause.id}: {source.path} does not exist"


@pytest.mark.parametrize("source", CODE_SOURCES, ids=[f"{s.library}:{s.symbol}" for s in CODE_SOURCES])
def test_library_sources_cite_the_pinned_version(source):
    pins = pinned_versions()
    assert source.library in pins, f"{source.library} has no pinned version in pyproject.toml or .ci/install"
    assert source.version == pins[source.library], (
        f"{source} was read at {source.version} but the adapter pins {pins[source.library]}: re-read the code and update the source")


def test_every_library_of_the_references_has_a_pin():
    missing = sorted(set(catalogue.libraries()) - set(pinned_versions()))
    assert not missing, f"libraries in spec/references.toml with no pinned version: {missing}"


@pytest.mark.parametrize("source", CODE_SOURCES, ids=[f"{s.library}:{s.symbol}" for s in CODE_SOURCES])
def test_library_sources_name_code_that_exists(source):
    """Where the library is installed, the cited file holds the cited symbol."""
    top = source.path.split("/")[0]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{source.library} is not installed here ({top}); checked where the adapter's environment has it")
    path = Path(list(spec.submodule_search_locations)[0]).parent / source.path
    assert path.is_file(), f"{source}: no file {source.path} in the installed {source.library}"
    text = path.read_text(encoding="utf-8")
    for part in source.symbol.split("."):
        assert re.search(rf"^\s*(def|class)\s+{re.escape(part)}\b", text, re.M), f"{source}: no def or class {part} in {source.path}"


def test_every_reference_is_cited():
    cited = {s.reference.key for c in CLAUSES for s in c.sources if isinstance(s, PaperSource)}
    unused = sorted(set(catalogue.references()) - cited)
    assert not unused, f"references no clause cites: {unused}"


def test_every_rlspec_finding_is_caught_by_a_clause():
    cited = catalogue.catalogued_bugs_cited()
    uncaught = [b.id for b in catalogue.bugs().values() if b.found_by_rlspec and not cited[b.id]]
    assert not uncaught, f"R entries no clause catches: {uncaught}"


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.stem for m in MUTANTS])
def test_mutants_name_catalogued_bugs(mutant):
    """A mutant's bug that starts with an id (``"C3 ..."``) names an entry of spec/bugs.toml."""
    first = mutant_metadata(mutant)["bug"].split()[0].rstrip(":,")
    if re.match(r"^[A-Z][0-9]+[a-z]?$", first):
        assert BUG_ID_PATTERN.match(first) and first in catalogue.bugs(), f"{mutant.name}: bug {first} is not in spec/bugs.toml"


# ------------------------------------------------------------------------------------------------
# No document outside the repository is cited

GAP = r"(?:\s|#)+"  # words of a phrase may be split across lines, or across comment lines
OUTSIDE = re.compile(
    rf"(?i:seed{GAP}00[01]|seed's|\b00[01]_[0-9a-f]{{6}}|(?<![\w-])bugs\.md|research/|research{GAP}notes|"
    rf"library(?:-|{GAP})notes|the{GAP}notes'{GAP}probes|shared/(seeds|research)|/work/shared)|PROBES"
)
SCANNED = ("spec/", "reference/", "checks/", "docs/", "tests/", "vectors/", "README.md", "conftest.py", "pyproject.toml", ".ci/")
# Files other helpers own while issue 15 is open; each still cites the research notes and is cleared
# by its owner (the adapters work). Remove an entry once its file is clean: the test then holds it.
PENDING: dict[str, str] = {}


def tracked_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", *SCANNED], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    return [f for f in out.splitlines() if f != "tests/test_sources.py"]


def test_no_file_cites_documents_outside_the_repository():
    hits = []
    for name in tracked_files():
        path = ROOT / name
        if name in PENDING or not path.is_file() or path.suffix in (".png", ".svg", ".pdf"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in OUTSIDE.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            hits.append(f"{name}:{number}: {text.splitlines()[number - 1].strip()[:120]}")
    assert not hits, "cite the paper, the library code at a version, a proof or a bug id instead:\n" + "\n".join(hits)


def test_pending_files_are_still_pending():
    """An allowance that is no longer needed is removed, so the file stays clean."""
    clean = [name for name in PENDING if (ROOT / name).is_file()
             and not OUTSIDE.search((ROOT / name).read_text(encoding="utf-8", errors="replace"))]
    assert not clean, f"these files no longer cite outside documents: remove them from PENDING: {clean}"

"""``rlspec book``: the static site, its data, its escaping, and the site itself in a real browser.

The browser tests drive the system's headless Chromium (Debian's ``chromium`` and ``chromium-driver``)
with selenium. Where either is missing they skip with a one-line reason; with
``RLSPEC_REQUIRE_BROWSER=1`` (set by ``.ci/run``) a missing browser fails instead. Screenshots of the
index, one clause page and the dashboard are saved in ``$RLSPEC_ARTEFACTS`` (or a temporary folder),
and the folder is printed.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rlspec.checks import load, run_conformance
from rlspec.checks.book import build as book_build
from rlspec.checks.book import collect, markdown
from rlspec.checks.matrix import history
from rlspec.checks.book.html import e, python, script_json
from rlspec.spec import catalogue

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "docs" / "conformance.json"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CLAUSE_WITH_MATH = "GAE-LAMBDA-MIXTURE"  # three proofs, sums and fractions: the screenshot of a clause page

EVIL_CANDIDATE = '''"""<b>evil</b> candidate: every text it controls is markup."""
import numpy as np

RLSPEC_VERSION = '<img src=x onerror="window.__pwned=1">evil 1.0</script><script>window.__pwned=2</script>'


class Markup:
    def __repr__(self):
        return "<script>window.__pwned=5</script>"


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    raise ValueError('<script>window.__pwned=3</script><img src=x onerror="window.__pwned=4"> & "quotes"')


def rewards_to_go(rewards, gamma):
    return np.zeros_like(rewards) + 1.0


def normalize_advantages(advantages, eps=1e-8):
    return Markup()
'''
EVIL_CLAUSES = ["GAE-SEED-EXAMPLE", "RETURNS-REWARD-TO-GO", "PPO-ADVANTAGE-NORMALISATION"]
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
EVIL_STUDY = {  # the format rlspec study --out writes (docs/studies.md), with a candidate's markup in its texts
    "rlspec": "0.1.0", "study": "clip-fraction", "title": "clip fraction <script>window.__pwned=6</script>",
    "illustrates": {"chapter": "ppo", "clauses": ["PPO-UPDATE-FIRST-RATIOS-ONE"]}, "sources": ["Schulman et al. 2017"],
    "candidate": "<b>evil</b>", "operations": {"ppo_update": "candidate"}, "seeds": 2, "size": "small", "settings": {},
    "table": {"columns": [], "rows": []}, "claims": [{"id": "c", "statement": "<img src=x onerror=\"window.__pwned=7\">",
    "source": "", "criterion": "", "holds": False, "measured": "1 < 2"}], "holds": False, "notes": [],
    "figure": "clip-fraction.png", "data": {}}


# ------------------------------------------------------------------------------------------------
# builds (once per session)


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """The book of this checkout, built by the command line as a user runs it: the committed matrix, its
    history, docs/bugs-found.md, the mutants, the vectors, every proof re-derived, the figures drawn."""
    out = tmp_path_factory.mktemp("book") / "site"
    done = subprocess.run([sys.executable, "-m", "rlspec.checks.cli", "book", str(out)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout


@pytest.fixture(scope="session")
def evil(tmp_path_factory):
    """A book with a candidate whose messages and version string are HTML and script, twice: as a column of the
    matrix (version, description) and as a ``--json`` run. Built in-process with two proofs (fast)."""
    from rlspec.spec import proofs as proofs_module

    folder = tmp_path_factory.mktemp("evil")
    module = folder / "evil_candidate.py"
    module.write_text(EVIL_CANDIDATE, encoding="utf-8")
    run = run_conformance(str(module), clauses=EVIL_CLAUSES, isolate=False)
    (folder / "run.json").write_text(run.dumps(), encoding="utf-8")
    candidate = load(str(module))
    report = {"adapter": "evil", "available": True, "candidates": [{
        "candidate": "evil", "adapter": "evil", "variant": None, "description": candidate.version, "version": candidate.version,
        "conventions": {}, "xfail": {}, "run": run.to_json()}]}
    matrix = json.loads(MATRIX.read_text(encoding="utf-8"))
    matrix["adapters"].append(report)
    (folder / "matrix.json").write_text(json.dumps(matrix), encoding="utf-8")
    history.record({**matrix, "adapters": [report]}, folder / "history")
    (folder / "studies").mkdir()
    (folder / "studies" / "clip-fraction.json").write_text(json.dumps(EVIL_STUDY), encoding="utf-8")
    (folder / "studies" / "clip-fraction.png").write_bytes(PIXEL)
    saved = proofs_module.PROOFS
    few = {k: saved[k] for k in ("gae.seed_example", "returns.reward_to_go_recursion")}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(proofs_module, "PROOFS", few)
        summary = book_build.build(folder / "site", matrix=folder / "matrix.json", history=folder / "history",
                                   runs=[folder / "run.json"], studies=folder / "studies", figures=False, jobs=1)
    return folder / "site", summary, run


def _pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


# ------------------------------------------------------------------------------------------------
# the site as files


def test_every_clause_and_chapter_has_a_page(built):
    site, stdout = built
    clauses = catalogue.clauses()
    assert {p.stem for p in (site / "clauses").glob("*.html")} == {c.id for c in clauses}
    assert {p.stem for p in (site / "chapters").glob("*.html")} == {ch.name for ch in catalogue.chapters()}
    for name in ("index", "dashboard", "history", "bugs-found", "bugs", "contract", "works"):
        assert (site / f"{name}.html").is_file(), name
    pages = len(_pages(site))
    assert f"wrote {pages} pages" in stdout, stdout
    print(stdout.strip().splitlines()[-2])  # the build time and page count, for the log


class _Refs(HTMLParser):
    """Every URL the browser would load by itself (not links a reader follows)."""

    def __init__(self):
        super().__init__()
        self.loaded: list[str] = []
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag in ("script", "img", "iframe", "audio", "video", "source", "embed") and attrs.get("src"):
            self.loaded.append(attrs["src"])
        if tag == "link" and attrs.get("href"):
            self.loaded.append(attrs["href"])
        if tag == "object" and attrs.get("data"):
            self.loaded.append(attrs["data"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])


@functools.cache  # a book's pages never change once built; three tests walk every page of the same book
def _parse(path: Path) -> _Refs:
    parser = _Refs()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_nothing_is_loaded_from_elsewhere(built):
    """No script, stylesheet, font or image outside the book: everything a page loads is a file beside it."""
    site, _ = built
    for page in _pages(site):
        for url in _parse(page).loaded:
            if url == "data:,":  # the empty icon: no favicon request at all
                continue
            assert not re.match(r"^([a-z][a-z0-9+.-]*:|//)", url), f"{page.name} loads {url}"
            assert (page.parent / url).resolve().is_file(), f"{page.name} loads {url}, which the book lacks"
    for css in site.rglob("*.css"):
        assert not re.search(r"url\(|@import", css.read_text(encoding="utf-8")), css


def test_internal_links_resolve(built):
    """Every link of every page of the book, walked: an internal href lands on a file that exists and, where it names
    an anchor, on an id that exists there (a link ending in a bare ``#`` would land on the top of the page: refused)."""
    site, _ = built
    ids: dict[Path, set[str]] = {}
    walked = 0
    for page in _pages(site):
        for href in _parse(page).links:
            if re.match(r"^[a-z][a-z0-9+.-]*:", href):
                continue  # a link a reader follows to the paper or the library's code (test_upstream_links_name_their_thread)
            walked += 1
            path, hash_, fragment = href.partition("#")
            assert not (hash_ and not fragment), f"{page.relative_to(site)} links to {href}: an empty anchor lands on the top"
            target = (page.parent / path.split("?")[0]).resolve() if path else page
            assert target.is_file(), f"{page.relative_to(site)} links to {href}"
            if fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = _parse(target).ids
                assert fragment in ids[target], f"{page.relative_to(site)} links to {href}: no such id"
    assert walked > 1000, walked  # some 5000 on the committed matrix: the walk saw the book


def test_defect_links_land_on_their_entry(built):
    """Every link to the defects found names an entry's heading, titles with markup (`code`) included."""
    site, _ = built
    headings = _parse(site / "bugs-found.html").ids
    targets = {href for page in _pages(site) for href in _parse(page).links if "bugs-found.html" in href}
    assert targets and all(href.partition("#")[2] in headings for href in targets if "#" in href), sorted(targets)[:5]
    entries = {href.partition("#")[2] for href in targets if "#" in href}
    assert {"1-skrl-truncation-ignored-by-default-time_limit_bootstrapfalse", "17-stable-baselines3-sacs-target_update_interval-restarts-in-every-train-call"} <= entries


def test_upstream_links_name_their_thread(built):
    """An upstream link reads as its thread: the repository, issue or PR, and the number of the address it opens."""
    site, _ = built
    pattern = re.compile(r'<a class="upstream" href="https://github\.com/([^/"]+/[^/"]+)/(issues|pull)/(\d+)">([^<]*)</a>')
    found = []
    for page in [site / "bugs.html", *sorted((site / "clauses").glob("*.html"))]:
        text = page.read_text(encoding="utf-8")
        assert ">upstream</a>" not in text, page.name
        for repo, kind, number, label in pattern.findall(text):
            found.append(label)
            assert label == f"{repo} {'issue' if kind == 'issues' else 'PR'} #{number}", (page.name, label)
    links = sum(len(b.links) for b in catalogue.bugs().values())
    assert len(found) >= links, (len(found), links)


def test_every_verdict_of_the_matrix_is_on_its_clause_page(built):
    site, _ = built
    matrix = json.loads(MATRIX.read_text(encoding="utf-8"))
    columns = collect.matrix_columns(matrix)
    for column in columns:
        for clause_id, result in column.results.items():
            if result["status"] not in ("fail", "error", "xfail"):
                continue
            text = (site / "clauses" / f"{clause_id}.html").read_text(encoding="utf-8")
            assert f'id="v-{column.slug}"' in text, (clause_id, column.candidate)
            assert e(result.get("counterexample") or result["message"]) in text, (clause_id, column.candidate)


def test_proofs_are_rederived_and_printed_as_mathml(built):
    site, _ = built
    text = (site / "clauses" / f"{CLAUSE_WITH_MATH}.html").read_text(encoding="utf-8")
    for proof_id in catalogue.by_id(CLAUSE_WITH_MATH).proofs:
        assert f'id="proof-{proof_id}"' in text
    assert text.count('<math display="block">') >= 8
    assert "<msup>" in text and "&#x2208;" in text  # powers, and a symbol's domain from its SymPy assumptions
    assert "re-derived when this book was built" in text


def test_proofs_speak_their_clauses_notation(built):
    """The relations a proof decided are printed in the clause's symbols: no working symbol that reads as Euler's number
    (e, e_0 ...) on any page, and the clip table in r, A and epsilon with each region as its condition, what the
    decided sides simplified to beside it."""
    site, _ = built
    for page in (site / "clauses").glob("*.html"):
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r'<ol class="identities">(.*?)</ol>', text, re.S):
            assert "<mi>e</mi>" not in block, f"{page.name}: a working symbol e (read as Euler's number) is printed"
    text = (site / "clauses" / "PPO-CLIP-GRADIENT-TABLE.html").read_text(encoding="utf-8")
    block = re.search(r'<div class="proof" id="proof-ppo.clip_gradient_table">.*?<ol class="identities">(.*?)</ol>', text, re.S).group(1)
    assert "<mi>&#949;</mi>" in block and "<mi>r</mi>" in block and "<mi>A</mi>" in block
    assert not re.search(r"<mi>[aswf]</mi>", block), "the clip regions' working symbols a, s, w are printed"
    assert "<mtext>where</mtext>" in block and "which SymPy simplifies to" in block
    assert '<i class="mi">&#949;</i>' in text or "<i class=\"mi\">ε</i>" in text  # the statement typeset: epsilon as a letter


def test_statements_are_typeset_as_mathematics():
    from rlspec.checks.book.mathtext import render

    out = render("E[A_hat_t | s_t] = A^pi(s_t, a_t) <= C max_s KL(pi || pi') with gamma^t G_t, `code_name`, reinforce_loss")
    assert '<i class="mi">A\u0302</i><sub>t</sub>' in out and "A<sup>π</sup>" in out and "≤" in out and "‖" in out
    assert "max<sub>s</sub>" in out and "<code>code_name</code>" in out and "<code>reinforce_loss</code>" in out
    assert render("<script>alert(1)</script> GAE-SEED-EXAMPLE non-terminal") == \
        "&lt;script&gt;alert(1)&lt;/script&gt; GAE-SEED-EXAMPLE non-terminal"


def test_figures_are_embedded_on_their_chapters(built):
    site, _ = built
    for figure in book_build.FIGURES:
        assert (site / "figures" / figure["file"]).stat().st_size > 10_000
        assert f'figures/{figure["file"]}' in (site / "chapters" / f'{figure["chapter"]}.html').read_text(encoding="utf-8")


def test_mutants_and_vectors_of_a_clause(built):
    site, _ = built
    text = (site / "clauses" / "GAE-BACKWARD-RECURSION.html").read_text(encoding="utf-8")
    assert "gae_forward_loop" in text and "recursion in the wrong direction" in text
    assert "gae/terminal-after-step-1" in text and (site / "vectors" / "gae.json").is_file()


def test_history_page_and_dashboard_show_versions(built):
    site, _ = built
    dashboard = (site / "dashboard.html").read_text(encoding="utf-8")
    history_page = (site / "history.html").read_text(encoding="utf-8")
    for report in json.loads(MATRIX.read_text(encoding="utf-8"))["adapters"]:
        version = report["candidates"][0]["version"]
        assert e(version) in dashboard and e(version) in history_page
        assert f'id="h-{report["adapter"]}"' in history_page


# ------------------------------------------------------------------------------------------------
# escaping


def test_candidate_text_is_escaped_everywhere(evil):
    site, _, run = evil
    for page in _pages(site):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"<script>window|<img src=x|onerror=\"|</script><script>window", text), page
    clause = (site / "clauses" / "GAE-SEED-EXAMPLE.html").read_text(encoding="utf-8")
    assert e(run["GAE-SEED-EXAMPLE"].message) in clause  # shown, as text
    assert e('<img src=x onerror="window.__pwned=1">evil 1.0') in (site / "dashboard.html").read_text(encoding="utf-8")


def test_studies_are_embedded_on_their_chapter_and_linked_from_their_clauses(evil):
    site, summary, _ = evil
    assert summary.studies == 1 and (site / "figures" / "studies" / "clip-fraction.png").read_bytes() == PIXEL
    chapter = (site / "chapters" / "ppo.html").read_text(encoding="utf-8")
    assert 'id="study-clip-fraction"' in chapter and 'src="../figures/studies/clip-fraction.png"' in chapter
    assert e(EVIL_STUDY["title"]) in chapter and e(EVIL_STUDY["claims"][0]["statement"]) in chapter
    clause = (site / "clauses" / "PPO-UPDATE-FIRST-RATIOS-ONE.html").read_text(encoding="utf-8")
    assert "../chapters/ppo.html#study-clip-fraction" in clause


def test_script_json_cannot_close_its_script():
    text = script_json({"statement": "</script><script>alert(1)</script> & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text)["statement"].startswith("</script>")


def test_python_highlighting_escapes_and_keeps_the_text():
    source = 'def f(x):\n    return "<b>" + x  # a <comment>\n'
    shown = python(source)
    assert "<b>" not in shown and "&lt;b&gt;" in shown and '<span class="k">def</span>' in shown
    assert re.sub(r"<[^>]+>", "", shown).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"') == source


# ------------------------------------------------------------------------------------------------
# markdown, bugs-found, history


def test_markdown_keeps_anchors_and_nothing_else_raw():
    rendered = markdown.render(
        '## 1. A heading with `code_name`\n\n<a id="d-1" data-clauses="GAE-* KL-DIRECTION" data-adapters="skrl" onclick="x"></a>\n'
        "text <script>alert(1)</script> [bad](javascript:alert(1)) [doc](conformance.md) <https://example.org/a>\n\n"
        "| a | b |\n|---|---|\n| `x \\| y` | 2 \\| 3 |\n", links=lambda url: "dashboard.html" if url == "conformance.md" else None)
    html = rendered.html
    assert '<a id="d-1" data-clauses="GAE-* KL-DIRECTION" data-adapters="skrl"></a>' in html and "onclick" not in html
    assert "<script>" not in html and "&lt;script&gt;" in html and "javascript:" not in html
    assert '<a href="dashboard.html">doc</a>' in html and '<a href="https://example.org/a">' in html
    assert "<code>x | y</code>" in html and "<td>2 | 3</td>" in html
    assert rendered.headings[0][1] == "1-a-heading-with-code_name"  # GitHub's id


def test_bugs_found_entries_from_their_cells_lines(tmp_path):
    path = tmp_path / "bugs-found.md"
    path.write_text("# Defects\n\n## 1. skrl: truncation ignored\n\nCells: `skrl` GAE-TRUNCATION-BOOTSTRAP, GRID-*\n\n"
                    "## Not a defect\n\n- the one-stream variant\n  Cells: `rlax:stream` GAE-*\n")
    columns = collect.matrix_columns(json.loads(MATRIX.read_text(encoding="utf-8")))
    found = collect.bugs_found(path, columns, lambda url: None)
    defect, other = found.defects
    assert (defect.anchor, defect.defect, defect.adapters) == ("1-skrl-truncation-ignored", True, {"skrl"})
    assert (other.anchor, other.defect) == ("not-a-defect", False)
    skrl = next(c for c in columns if c.candidate == "skrl")
    assert found.explaining("GAE-TRUNCATION-BOOTSTRAP", skrl) == [defect] and found.explaining("GRID-TRAIN-PPO-IMPROVES", skrl) == [defect]
    assert found.explaining("GAE-SEED-EXAMPLE", skrl) == []


def test_committed_bugs_found_explains_library_failures():
    """docs/bugs-found.md names, for the defects it lists, clauses and libraries the book can link a FAIL cell to."""
    columns = collect.matrix_columns(json.loads(MATRIX.read_text(encoding="utf-8")))
    found = collect.bugs_found(ROOT / "docs" / "bugs-found.md", columns, lambda url: None)
    assert found.defects and all(d.adapters for d in found.defects)
    linked = [(k, c.candidate) for c in columns if c.is_library for k, r in c.results.items()
              if r["status"] == "fail" and found.explaining(k, c)]
    assert linked, "no FAIL cell of a library's default column links to bugs-found.md"


def test_history_holds_many_versions(tmp_path):
    def matrix(version, status):
        run = {"clauses": [{"id": "GAE-SEED-EXAMPLE", "status": status, "message": "", "counterexample": ""}]}
        return {"rlspec": "0.1.0", "profile": "ci", "seed": 0, "adapters": [
            {"adapter": "lib", "available": True, "candidates": [{"candidate": "lib", "version": version, "run": run}]},
            {"adapter": "absent", "available": False, "reason": "No module named 'absent'", "candidates": []}]}

    folder = tmp_path / "matrix-history"
    assert [p.name for p in history.record(matrix("lib 2.10.0", "pass"), folder, today="2026-02-01")] == ["lib_2.10.0.json"]
    history.record(matrix("lib 2.9.2", "fail"), folder, today="2026-01-01")
    assert history.record(matrix("lib 2.9.2", "fail"), folder, today="2026-03-01") == []  # unchanged: not rewritten
    records = history.load(folder)
    assert list(records) == ["lib"] and [r["version"] for r in records["lib"]] == ["lib 2.9.2", "lib 2.10.0"]
    history.record(matrix("lib 2.9.2", "pass"), folder, today="2026-03-02")  # a re-run of a version replaces it
    again = history.load(folder)["lib"][0]
    assert again["recorded"] == "2026-03-02" and again["report"]["candidates"][0]["run"]["clauses"][0]["status"] == "pass"
    (folder / "lib" / "broken.json").write_text("{}", encoding="utf-8")
    with pytest.raises(history.HistoryError, match="not a matrix history record"):
        history.load(folder)


def test_committed_history_holds_the_committed_matrix():
    """Each library version in docs/conformance.json has its record in docs/matrix-history with the same verdicts
    (`rlspec matrix` writes both; after merging a matrix, `rlspec matrix --from-json docs/conformance.json` records it)."""
    matrix = json.loads(MATRIX.read_text(encoding="utf-8"))
    records = history.load(ROOT / "docs" / history.FOLDER)
    for report in matrix["adapters"]:
        if not report.get("available"):
            continue
        version = report["candidates"][0]["version"]
        entry = next((r for r in records.get(report["adapter"], []) if r["version"] == version), None)
        assert entry is not None, f"{report['adapter']} {version} has no record in docs/matrix-history"
        assert history._verdicts(entry["report"]) == history._verdicts(report), f"{report['adapter']} {version}: stale record"


def test_matrix_from_json_records_history(tmp_path, capsys):
    from rlspec.checks.cli import main

    assert main(["matrix", "--from-json", str(MATRIX), "--out", str(tmp_path)]) == 0
    assert "history file(s)" in capsys.readouterr().out
    assert set(history.load(tmp_path / history.FOLDER)) == {r["adapter"] for r in json.loads(MATRIX.read_text())["adapters"] if r.get("available")}


# ------------------------------------------------------------------------------------------------
# the command line


def test_help_says_it_is_built_from_a_checkout(capsys):
    from rlspec.checks.cli import main

    with pytest.raises(SystemExit):
        main(["book", "--help"])
    assert "built from an rlspec checkout" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("args, words", [
    (["--mutants", "/nonexistent/mutants"], "no mutant catalogue at /nonexistent/mutants"),
    (["--matrix", "/nonexistent.json"], "--matrix /nonexistent.json: no such file"),
    (["--mutants", "tests/mutants", "--no-mutants"], "exclude each other"),
    (["-j", "0"], "--jobs must be at least 1"),
])
def test_bad_arguments_are_one_line(tmp_path, capsys, args, words):
    from rlspec.checks.cli import main

    assert main(["book", str(tmp_path / "site"), *args]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_refuses_a_folder_it_did_not_write(tmp_path, capsys):
    from rlspec.checks.cli import main

    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["book", str(tmp_path), "--no-mutants"]) == 2
    assert "not a book rlspec wrote" in capsys.readouterr().err and (tmp_path / "notes.txt").is_file()


def test_builds_without_mutants_when_asked(tmp_path):
    from rlspec.spec import proofs as proofs_module

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(proofs_module, "PROOFS", {"gae.seed_example": proofs_module.PROOFS["gae.seed_example"]})
        summary = book_build.build(tmp_path / "site", mutants=None, figures=False, jobs=1)
    assert summary.pages == len(catalogue.clauses()) + len(catalogue.chapters()) + 8
    assert "built without tests/mutants" in (tmp_path / "site" / "clauses" / "GAE-BACKWARD-RECURSION.html").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------
# in a real browser


def _artefacts() -> Path:
    folder = Path(os.environ.get("RLSPEC_ARTEFACTS") or tempfile.mkdtemp(prefix="rlspec-book-artefacts-"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def artefacts(request):
    folder = _artefacts()
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # printed even while output is captured
            reporter.write_line(f"rlspec book: screenshots in {folder}")
    return folder


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (pip install -e '.[dev]')")
    if missing:
        reason = f"no browser for the book's tests: {', '.join(missing)} missing (apt-get install -y chromium chromium-driver)"
        if os.environ.get("RLSPEC_REQUIRE_BROWSER"):
            pytest.fail(f"RLSPEC_REQUIRE_BROWSER is set but there is {reason}")
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync", "--disable-extensions", "--disable-default-apps", "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _open(driver, path: Path, query: str = ""):
    driver.get(path.resolve().as_uri() + query)
    driver.execute_script("return document.readyState")
    return driver


def _console_errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]


def _requests(driver) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _screenshot(driver, path: Path, height: int) -> None:
    """The top ``height`` pixels of the page (more than the window shows), as a PNG."""
    import base64

    total = driver.execute_script("return document.documentElement.scrollHeight")
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": {
        "x": 0, "y": 0, "width": driver.execute_script("return window.innerWidth"), "height": min(height, total), "scale": 1}})
    path.write_bytes(base64.b64decode(shot["data"]))


# Shown: laid out (a hidden row or any element inside one has no client rectangles) and not visibility: hidden.
# Decided in one script for all the matches: WebDriver's is_displayed() is a round trip per element, and the
# dashboard's table has thousands of cells (about a minute per test that way on a 2-core machine).
_SHOWN = ("return Array.from(document.querySelectorAll(arguments[0])).filter(e => e.getClientRects().length > 0 "
          "&& getComputedStyle(e).visibility !== 'hidden')")


def _visible(driver, css: str) -> list:
    return driver.execute_script(_SHOWN, css)


def _visible_attribute(driver, css: str, name: str) -> list[str | None]:
    """``name`` of every shown match of ``css``, read in the page (one round trip, not one per element)."""
    return driver.execute_script(_SHOWN + ".map(e => e.getAttribute(arguments[1]))", css, name)


def test_browser_index_lists_every_clause_and_searches(built, browser, artefacts):
    site, _ = built
    _open(browser, site / "index.html")
    listed = set(_visible_attribute(browser, "tr.clause-row", "data-id"))
    assert listed == {c.id for c in catalogue.clauses()}
    _screenshot(browser, artefacts / "index.png", 1600)
    box = browser.find_element("id", "search")
    box.send_keys("truncation")
    texts = _visible_attribute(browser, "tr.clause-row", "data-text")
    assert 0 < len(texts) < len(listed) and all("truncation" in t for t in texts)
    results = _visible(browser, "#search-results li a")
    assert results and all(r.get_attribute("href").startswith("file://") for r in results)
    results[0].click()
    assert "/clauses/" in browser.current_url
    assert not _console_errors(browser)


def test_browser_clause_page_renders_math(built, browser, artefacts):
    site, _ = built
    _open(browser, site / "clauses" / f"{CLAUSE_WITH_MATH}.html")
    sizes = browser.execute_script(
        "return Array.from(document.querySelectorAll('math')).map(m => { const r = m.getBoundingClientRect(); "
        "return [r.width, r.height]; });")
    assert len(sizes) >= 8 and all(w > 0 and h > 0 for w, h in sizes), sizes[:5]
    # rendered as mathematics, not as a run of text: a fraction is taller than a line, a subscript sits lower
    layout = browser.execute_script(
        "const f = document.querySelector('mfrac'), s = document.querySelector('msub > :last-child'),"
        " b = document.querySelector('msub > :first-child');"
        "return [f ? f.getBoundingClientRect().height : 0, parseFloat(getComputedStyle(document.body).lineHeight),"
        " s.getBoundingClientRect().bottom - b.getBoundingClientRect().bottom];")
    assert layout[0] > layout[1] * 0.9 and layout[2] > 0, layout
    _screenshot(browser, artefacts / "clause.png", 2600)
    assert not _console_errors(browser)


def test_browser_dashboard_filters_change_the_rows(built, browser, artefacts):
    from selenium.webdriver.support.ui import Select

    site, _ = built
    _open(browser, site / "dashboard.html")
    every = len(_visible(browser, "tr.mrow"))
    assert every == len(catalogue.clauses())
    _screenshot(browser, artefacts / "dashboard.png", 1400)
    Select(browser.find_element("id", "f-chapter")).select_by_value("kl")
    kl = _visible_attribute(browser, "tr.mrow", "data-chapter")
    assert len(kl) == len([c for c in catalogue.clauses() if c.chapter == "kl"])
    assert set(kl) == {"kl"}
    Select(browser.find_element("id", "f-chapter")).select_by_value("")
    Select(browser.find_element("id", "f-status")).select_by_value("fail")
    failing = _visible(browser, "tr.mrow")
    assert 0 < len(failing) < every
    assert browser.execute_script(_SHOWN + ".filter(r => !r.querySelector('td[data-status=\"fail\"]')).length",
                                  "tr.mrow") == 0, "a row shown under status=fail has no failing cell"
    Select(browser.find_element("id", "f-library")).select_by_value("sb3")
    assert set(_visible_attribute(browser, "td.cell", "data-lib")) == {"sb3"}
    sb3 = _visible(browser, "tr.mrow")
    assert 0 < len(sb3) < len(failing)
    assert browser.find_element("id", "f-count").text == f"showing {len(sb3)} of {every} clauses"
    # the chapter pages link to their rows: the filter comes from the address
    _open(browser, site / "dashboard.html", "?chapter=gae")
    assert len(_visible(browser, "tr.mrow")) == len([c for c in catalogue.clauses() if c.chapter == "gae"])
    assert not _console_errors(browser)


def test_browser_fail_cell_lands_on_its_counterexample_and_its_defect(built, browser):
    site, _ = built
    matrix = json.loads(MATRIX.read_text(encoding="utf-8"))
    results = {(c.slug, k): r for c in collect.matrix_columns(matrix) for k, r in c.results.items()}
    _open(browser, site / "dashboard.html")
    cell = _visible(browser, 'td[data-status="fail"] a.st-fail')[0]  # a library's own column (variants are folded)
    href = cell.get_attribute("href")
    clause_id = re.search(r"/clauses/([A-Z0-9-]+)\.html#v-(.+)$", href)
    cell.click()
    assert browser.current_url == href
    target = browser.find_element("id", f"v-{clause_id.group(2)}")
    top = browser.execute_script("return arguments[0].getBoundingClientRect().top", target)
    assert 0 <= top < browser.execute_script("return window.innerHeight")
    expected = results[(clause_id.group(2), clause_id.group(1))]["counterexample"]
    shown = target.find_element("css selector", "pre.counterexample").text
    assert shown.split() == expected.split()
    # the defect entry of a FAIL, from the dashboard, in one click
    _open(browser, site / "dashboard.html")
    refs = _visible(browser, 'td[data-status="fail"] a.bugref')
    assert all(r.get_attribute("href").partition("#")[2] for r in refs), "a defect link without its anchor"
    ref = refs[0]
    anchor = ref.get_attribute("href").partition("#")[2]
    ref.click()
    assert browser.current_url.split("#")[0].endswith("/bugs-found.html")
    landed = browser.find_element("id", anchor)
    assert 0 <= browser.execute_script("return arguments[0].getBoundingClientRect().top", landed) < 200
    assert not _console_errors(browser)


def test_browser_no_console_errors_and_no_request_leaves_the_files(built, browser):
    site, _ = built
    _requests(browser)  # drop what earlier tests loaded
    for page in ["index.html", "dashboard.html", "history.html", "diff.html", "bugs-found.html", "bugs.html", "contract.html", "works.html",
                 "chapters/ppo.html", "chapters/gae.html", f"clauses/{CLAUSE_WITH_MATH}.html", "clauses/KL-K3-UNBIASED.html"]:
        _open(browser, site / page)
        assert not _console_errors(browser), page
    requested = _requests(browser)
    assert any(u.endswith("book.css") for u in requested) and any(u.endswith(".png") for u in requested)
    assert all(u.startswith(("file://", "data:")) for u in requested), [u for u in requested if not u.startswith("file://")]


def test_browser_candidate_markup_does_not_execute(evil, browser):
    from selenium.common.exceptions import NoAlertPresentException

    site, _, run = evil
    for page in ["dashboard.html", "clauses/GAE-SEED-EXAMPLE.html", "clauses/PPO-ADVANTAGE-NORMALISATION.html",
                 "clauses/RETURNS-REWARD-TO-GO.html", "history.html", "diff.html", "index.html", "chapters/ppo.html",
                 "clauses/PPO-UPDATE-FIRST-RATIOS-ONE.html"]:
        _open(browser, site / page)
        assert browser.execute_script("return typeof window.__pwned") == "undefined", page
        assert not browser.find_elements("css selector", 'img[src="x"]'), page
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018 - raises when there is no alert
    _open(browser, site / "clauses" / "GAE-SEED-EXAMPLE.html")
    assert "<script>window.__pwned=3</script>" in browser.find_element("tag name", "body").text  # shown as text
    assert not _console_errors(browser)


# ------------------------------------------------------------------------------------------------
# the dashboard people share, the history across releases and the diff (issue 30)


@pytest.fixture(scope="session")
def releases_book(tmp_path_factory):
    """A book whose history holds three releases of sb3 (made from the committed matrix's sb3 report): 2.0.0 breaks
    GAE-TRUNCATION-BOOTSTRAP, 2.1.0 fixes it, 2.2.0 is the matrix's; its releases.json lists a release that did not
    install and one outside the range. Built in-process with two proofs (fast)."""
    import copy

    from rlspec.checks.matrix import releases
    from rlspec.spec import proofs as proofs_module

    folder = tmp_path_factory.mktemp("releases-book")
    matrix = json.loads(MATRIX.read_text(encoding="utf-8"))
    sb3 = next(r for r in matrix["adapters"] if r["adapter"] == "sb3")
    hist = folder / "history"
    for day, (release, broken) in enumerate((("2.0.0", True), ("2.1.0", False), ("2.2.0", False)), 1):
        report = copy.deepcopy(sb3)
        for c in report["candidates"]:
            c["version"] = f"stable-baselines3 {release}"
            for r in c["run"]["clauses"]:
                if broken and c["candidate"] == "sb3" and r["id"] == "GAE-TRUNCATION-BOOTSTRAP":
                    r.update(status="fail", message="truncation treated as termination (a stand-in)")
        history.write_record(hist, report, rlspec="0.1.0", profile="quick", seed=0, today=f"2026-01-0{day}",
                             commit="0123456789abcdef" if release == "2.0.0" else "fedcba9876543210",  # the suite changed too
                             extra={"release": release, "environment": {"stable-baselines3": release}})
    (hist / "sb3" / releases.INDEX).write_text(json.dumps({
        "schema": 1, "adapter": "sb3", "distribution": "stable-baselines3", "range": ">=2.0.0", "why": "Gymnasium",
        "releases": {"1.8.0": {"status": "outside-range", "reason": "outside the declared range >=2.0.0: Gymnasium"},
                     "2.0.0": {"status": "checked", "install_seconds": 50.0, "runs": {"quick/seed0": {"run_seconds": 90.0}}},
                     "2.0.1": {"status": "not-installable", "reason": "pins a torch other than this machine's CPU build"}}}))
    bugs = folder / "bugs-found.md"
    bugs.write_text("# Defects\n\n## 1. sb3: truncation (a stand-in)\n\nCells: `sb3` GAE-TRUNCATION-BOOTSTRAP\n\nVersion: x\n\n"
                    + (ROOT / "docs" / "bugs-found.md").read_text(encoding="utf-8").partition("\n## 1.")[0].partition("\n")[2], encoding="utf-8")
    saved = proofs_module.PROOFS
    few = {k: saved[k] for k in ("gae.seed_example", "returns.reward_to_go_recursion")}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(proofs_module, "PROOFS", few)
        book_build.build(folder / "site", matrix=MATRIX, history=hist, bugs_found=bugs, figures=False, jobs=1)
    return folder / "site"


def test_a_change_between_records_of_two_rlspec_commits_says_the_suite_changed_too(releases_book):
    text = (releases_book / "history.html").read_text(encoding="utf-8")
    change = re.search(r'<ul class="changes">(.*?)</ul>', text, re.S).group(1)
    assert "GAE-TRUNCATION-BOOTSTRAP" in change and "(rlspec 0123456 → fedcba9: the suite changed between these runs too)" in change
    assert "rlspec 0.1.0 @ 0123456, quick, seed 0" in text and "rlspec 0.1.0 @ fedcba9, quick, seed 0" in text


def test_dashboard_totals_per_implementation_and_chapter(built):
    site, _ = built
    text = (site / "dashboard.html").read_text(encoding="utf-8")
    matrix = json.loads(MATRIX.read_text(encoding="utf-8"))
    sb3 = next(c for r in matrix["adapters"] for c in r["candidates"] if c["candidate"] == "sb3")
    statuses = [r["status"] for r in sb3["run"]["clauses"]]
    provided = sum(s in ("pass", "fail", "error", "xfail") for s in statuses)
    passed = statuses.count("pass")
    row = re.search(r'<tr data-lib="sb3">.*?</tr>', text, re.S).group(0)
    assert f"{passed} of {provided}<span class=\"pct\">{100 * passed / provided:.0f}%</span>" in row
    assert row.count('<td class="rate') == 1 + len(catalogue.chapters())  # every chapter, then one per chapter
    assert '<svg class="spark"' in row  # the pass rate over releases
    assert 'id="run-meta"' in text and 'data-meta="profile"><code>ci</code>' in text


def test_diff_data_encodes_every_run_of_the_book(releases_book):
    text = (releases_book / "assets" / "diff-data.js").read_text(encoding="utf-8")
    data = json.loads(re.fullmatch(r"window.RLSPEC_DIFF = (.*);\n", text).group(1))
    keys = [r["key"] for r in data["runs"]]
    assert keys[:3] == ["sb3@2.0.0", "sb3@2.1.0", "sb3@2.2.0"] and "matrix:sb3" in keys
    i = data["clauses"].index("GAE-TRUNCATION-BOOTSTRAP")
    first, second = (dict(r["columns"])["sb3"] for r in data["runs"][:2])
    assert (first[i], second[i]) == ("f", "p") and len(first) == len(catalogue.clauses())


def test_browser_dashboard_folds_variants_shows_every_library_and_writes_the_address(built, browser, artefacts):
    from selenium.webdriver.support.ui import Select

    site, _ = built
    _open(browser, site / "dashboard.html")
    width = browser.execute_script("return window.innerWidth")
    assert width >= 1380  # the window is 1400 px wide
    groups = _visible(browser, "#matrix-table th.lib")
    libraries = {c["adapter"] for c in json.loads(MATRIX.read_text(encoding="utf-8"))["adapters"] if c.get("available")}
    assert set(_visible_attribute(browser, "#matrix-table th.lib", "data-lib")) == libraries
    right = browser.execute_script("return Math.max(...Array.from(document.querySelectorAll('#matrix-table th.lib'))"
                                   ".map(th => th.getBoundingClientRect().right))")
    assert right <= width, f"the last library ends at {right} px of {width}"
    assert not _visible(browser, "th.colname.variant") and not _visible(browser, "td.cell.variant")
    assert "?" not in browser.current_url  # the default view has no query
    meta = browser.find_element("id", "run-meta").text
    assert "rlspec" in meta and "profile" in meta and "seed" in meta and "commit" in meta and "date" in meta
    assert _visible(browser, "#totals-table svg.spark")
    Select(browser.find_element("id", "f-chapter")).select_by_value("gae")
    Select(browser.find_element("id", "f-status")).select_by_value("fail")
    browser.find_element("id", "f-variants").click()
    assert _visible(browser, "th.colname.variant")
    assert browser.current_url.endswith("dashboard.html?chapter=gae&status=fail&variants=1")
    shown = len(_visible(browser, "tr.mrow"))
    browser.execute_script("window.scrollTo(0, 0)")
    _screenshot(browser, artefacts / "dashboard-filtered.png", 1500)
    # the address is the view: opened afresh, it filters the same way
    _open(browser, site / "dashboard.html", "?chapter=gae&status=fail&variants=1")
    assert len(_visible(browser, "tr.mrow")) == shown and browser.find_element("id", "f-variants").is_selected()
    assert Select(browser.find_element("id", "f-chapter")).first_selected_option.get_attribute("value") == "gae"
    browser.find_element("id", "f-text").send_keys("GAE-T*")
    assert "id=GAE-T*" in browser.current_url.replace("%2A", "*")
    assert not _console_errors(browser)


def test_browser_history_chart_defects_and_releases_tried(releases_book, browser, artefacts):
    _open(browser, releases_book / "history.html")
    section = browser.find_element("id", "h-sb3")
    chart = section.find_element("css selector", "svg.spark.big")
    assert chart.size["width"] > 400 and len(chart.find_elements("css selector", "circle")) == 3
    assert "2.0.0" in chart.get_attribute("aria-label") and "2.2.0" in chart.get_attribute("aria-label")
    cells = section.find_elements("css selector", "table.defects td.aff")
    assert [c.get_attribute("class").split()[1] for c in cells] == ["affected", "not-affected", "not-affected"]
    tried = section.find_element("css selector", "details.tried")
    tried.find_element("tag name", "summary").click()
    rows = {r.find_elements("tag name", "td")[0].text: r.find_elements("tag name", "td")[1].text
            for r in tried.find_elements("css selector", "tbody tr")}
    assert rows == {"2.0.1": "not-installable", "2.0.0": "checked", "1.8.0": "outside-range"}
    assert "pins a torch other than" in tried.text
    browser.execute_script("window.scrollTo(0, 0)")
    _screenshot(browser, artefacts / "history.png", 1600)
    change = section.find_element("css selector", "ul.changes a.difflink")
    change.click()
    assert browser.current_url.endswith("diff.html?a=sb3@2.0.0&b=sb3@2.1.0") or "a=sb3%402.0.0&b=sb3%402.1.0" in browser.current_url
    assert not _console_errors(browser)


def test_browser_diff_of_two_releases_and_two_runs(releases_book, browser, artefacts):
    from selenium.webdriver.support.ui import Select

    _open(browser, releases_book / "diff.html", "?a=sb3@2.0.0&b=sb3@2.2.0")
    rows = _visible(browser, "#d-table tbody tr")
    assert [r.find_element("tag name", "code").text for r in rows] == ["GAE-TRUNCATION-BOOTSTRAP"]
    assert [s.text for s in rows[0].find_elements("css selector", ".st")] == ["FAIL", "pass"]
    assert browser.find_element("id", "d-summary").text.startswith("1 of ")
    _screenshot(browser, artefacts / "diff.png", 700)
    browser.find_element("id", "d-swap").click()
    assert [s.text for s in _visible(browser, "#d-table tbody tr .st")] == ["pass", "FAIL"]
    assert "a=sb3%402.2.0&b=sb3%402.0.0" in browser.current_url or "a=sb3@2.2.0&b=sb3@2.0.0" in browser.current_url
    # two runs of two libraries: their own columns
    Select(browser.find_element("id", "d-a")).select_by_value("matrix:sb3")
    Select(browser.find_element("id", "d-b")).select_by_value("matrix:skrl")
    assert len(_visible(browser, "#d-table tbody tr")) > 5
    browser.find_element("id", "d-same").click()
    assert any(r.get_attribute("class") == "same" for r in _visible(browser, "#d-table tbody tr"))
    assert "same=1" in browser.current_url
    assert not _console_errors(browser)

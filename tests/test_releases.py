"""The matrix across releases (checks/matrix/releases.py, `rlspec matrix --releases`, `rlspec matrix merge`): the adapters'
declared ranges, the plan of cells, shards that merge into exactly the report of one unsharded run, the history
files, and docs/bugs-found.md's "Affected releases" lines read off the history. Nothing here installs a library:
the environments and the adapter runs are stand-ins (a fake adapter checked in this process)."""

from __future__ import annotations

import ast
import importlib.machinery
import json
import re
import sys
import tomllib
import types
from pathlib import Path

import pytest

from rlspec.checks import matrix
from rlspec.checks.matrix import affected, bugs_found, releases
from rlspec.checks.matrix import history
from rlspec.checks.cli import main
from rlspec.checks.runner.loader import load

ROOT = Path(__file__).resolve().parents[1]
MUTANT = str(ROOT / "tests" / "mutants" / "gae_truncation_as_terminal.py")
CLAUSES = "GAE-SEED-EXAMPLE,GAE-SEED-EXAMPLE-TRUNCATED"


# ------------------------------------------------------------------------------------------------
# the declarations


def _written_against(adapter: str) -> str | None:
    """The release an adapter was written against: its WRITTEN_AGAINST, else the `~=` pin of its extra."""
    tree = ast.parse(releases.adapter_file(adapter).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "WRITTEN_AGAINST" for t in node.targets):
            return ast.literal_eval(node.value)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    dist = releases.declared(adapter).distribution
    for requirement in (r for reqs in extras.values() for r in reqs):
        found = re.fullmatch(rf"{re.escape(dist)}~=([\d.]+)", requirement)
        if found:
            return found.group(1)
    return None


@pytest.mark.parametrize("adapter", matrix.adapters())
def test_every_adapter_declares_the_releases_it_drives(adapter):
    decl = releases.declared(adapter)
    assert decl.why and decl.range
    written = _written_against(adapter)
    assert written is not None, f"{adapter}: no WRITTEN_AGAINST and no ~= pin in pyproject.toml"
    assert decl.contains(written), f"{adapter}: the release it was written against ({written}) is outside {decl.range}"


@pytest.mark.parametrize("source, message", [
    ("X = 1\n", "no top-level RELEASES"),
    ("RELEASES = {}\nRELEASES = {}\n", "more than one"),
    ("RELEASES = dict(a=1)\n", "literal dict"),
    ("RELEASES = [1]\n", "expected a dict"),
    ('RELEASES = {"distribution": "x", "range": ">=1", "why": "y", "extra": 1}\n', "unknown key(s) 'extra'"),
    ('RELEASES = {"distribution": "x", "range": ">=1"}\n', "RELEASES['why'] must be a non-empty string"),
    ('RELEASES = {"distribution": "a b", "range": ">=1", "why": "y"}\n', "not a distribution name"),
    ('RELEASES = {"distribution": "x", "range": "from 2.0", "why": "y"}\n', "not a PEP 440 specifier"),
    ('RELEASES = {"distribution": "x", "range": ">=1", "why": "y", "with": {"z": "=={mayor}.*"}}\n', "template"),
    ('RELEASES = {"distribution": "x", "range": ">=1", "why": "y", "with": {"z": "~{major}"}}\n', "does not make a specifier"),
])
def test_a_malformed_declaration_is_an_error_that_says_what(source, message):
    with pytest.raises(releases.ReleasesError, match=re.escape(message)):
        releases.declared("fake", source=source)


def test_a_declaration_fills_its_companions():
    decl = releases.declared("fake", source='RELEASES = {"distribution": "torchrl", "range": ">=0.10,!=0.11.0", "why": "w", '
                                            '"with": {"tensordict": "=={major}.{minor}.*"}}\n')
    assert decl.requirements("0.13.2") == ["torchrl==0.13.2", "tensordict==0.13.*"]
    assert decl.contains("0.14.1") and not decl.contains("0.11.0") and not decl.contains("0.9.2")


def test_a_release_outside_the_range_is_reported_never_run(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.8.0" if name == "stable-baselines3" else "0")
    sentence = releases.installed_outside("sb3")
    assert sentence.startswith("stable-baselines3 1.8.0 is outside the releases the adapter drives (>=2.0.0")
    report = matrix.check_adapter("sb3")
    assert report["available"] is False and report["outside_range"] is True and report["candidates"] == []
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.9.2")
    assert releases.installed_outside("sb3") is None


# ------------------------------------------------------------------------------------------------
# the plan and its shards


INDEX = {"stable-baselines3": ["1.8.0", "2.0.0", "2.1.0a1", "2.1.0", "2.9.2"], "skrl": ["1.4.3", "2.0.0", "2.1.1"]}


def test_the_plan_is_every_release_in_range_times_profiles_and_seeds():
    plan = releases.make_plan(["sb3"], "all", ["ci", "quick"], [0, 1], versions=INDEX.__getitem__)
    assert plan.adapters["sb3"]["releases"] == ["2.0.0", "2.1.0", "2.9.2"]  # pre-releases left out
    assert plan.adapters["sb3"]["outside"] == ["1.8.0"]
    assert plan.cells[:5] == [("sb3", "2.0.0", "ci", 0), ("sb3", "2.0.0", "ci", 1), ("sb3", "2.0.0", "quick", 0),
                              ("sb3", "2.0.0", "quick", 1), ("sb3", "2.1.0", "ci", 0)]
    assert len(plan.cells) == 12
    latest = releases.make_plan(["sb3"], "latest", ["ci"], [0], versions=INDEX.__getitem__)
    assert latest.cells == [("sb3", "2.9.2", "ci", 0)]
    chosen = releases.make_plan(["sb3"], "2.9.2,1.8.0", ["ci"], [0], versions=INDEX.__getitem__)
    assert chosen.cells == [("sb3", "2.9.2", "ci", 0)] and chosen.adapters["sb3"]["outside"] == ["1.8.0"]


def test_a_release_selection_that_cannot_be_planned_is_an_error():
    with pytest.raises(releases.ReleasesError, match="has no release 2.2.0"):
        releases.make_plan(["sb3"], "2.2.0", ["ci"], [0], versions=INDEX.__getitem__)
    with pytest.raises(releases.ReleasesError, match="name one adapter"):
        releases.make_plan(["sb3", "skrl"], "2.0.0", ["ci"], [0], versions=INDEX.__getitem__)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 7, 20])
def test_shards_are_contiguous_disjoint_nearly_equal_and_cover_the_cells(count):
    cells = list(range(17))
    slices = [releases.shard_cells(cells, i, count) for i in range(1, count + 1)]
    assert [c for s in slices for c in s] == cells
    assert max(map(len, slices)) - min(map(len, slices)) <= 1
    assert slices == [releases.shard_cells(cells, i, count) for i in range(1, count + 1)]  # deterministic


@pytest.mark.parametrize("text", ["0/2", "3/2", "2", "a/b", "1/0", ""])
def test_a_bad_shard_is_refused(text):
    with pytest.raises(releases.ReleasesError, match="expected I/N"):
        releases.parse_shard(text)


# ------------------------------------------------------------------------------------------------
# running cells: stand-in environments, a fake adapter checked here


def _fake_adapter(monkeypatch, tmp_path, name: str, version: str, broken: bool):
    reference, mutant = load("reference"), load(MUTANT)
    fake = types.ModuleType(f"rlspec.checks.adapters.{name}")
    fake.__spec__ = importlib.machinery.ModuleSpec(fake.__name__, None)
    fake.__file__ = str(tmp_path / f"{name}.py")
    fake.gae = (mutant if broken else reference).operations["gae"]
    fake.RLSPEC_VERSION = f"{name} {version}"
    monkeypatch.setitem(sys.modules, fake.__name__, fake)


@pytest.fixture()
def stand_ins(monkeypatch, tmp_path):
    """A plan over two fake libraries: 'alib' broke truncation in 1.1 and fixed it in 1.2; 'blib' 0.9 does not
    install. ``run(cells)`` runs cells with environments that record what was built."""
    plan = releases.Plan(
        adapters={"alib": {"distribution": "alib", "range": ">=1.0", "why": "w", "with": {}, "releases": ["1.0", "1.1", "1.2"],
                           "outside": ["0.5"]},
                  "blib": {"distribution": "blib", "range": ">=0.9", "why": "w", "with": {}, "releases": ["0.9"], "outside": []}},
        cells=[("alib", r, p, s) for r in ("1.0", "1.1", "1.2") for p in ("quick",) for s in (0, 1)] + [("blib", "0.9", "quick", 0)])
    built = []

    def build(decl, release):
        built.append((decl.adapter, release))
        if decl.adapter == "blib":
            return releases.Environment(None, tmp_path / "none", 1.0, reason="pins a torch other than this machine's CPU build")
        return releases.Environment(sys.executable, tmp_path / f"env-{release}", 2.0, {decl.distribution: release})

    def run_adapter(adapter, python, profile, seed):
        release = next(r for a, r in built[::-1] if a == adapter)
        _fake_adapter(monkeypatch, tmp_path, adapter, release, broken=release == "1.1")
        return matrix.check_adapter(adapter, profile=profile, seed=seed, clauses=CLAUSES)

    def run(cells):
        return releases.run_cells(plan, cells, envs=tmp_path, base_python=sys.executable, build=build,
                                  run_adapter=run_adapter, say=lambda line: None)
    return plan, run, built


def test_merged_shards_equal_one_unsharded_run(stand_ins, tmp_path):
    plan, run, built = stand_ins
    whole = releases.report(plan, run(plan.cells), shard=None, rlspec_commit="abc")
    assert built == [("alib", "1.0"), ("alib", "1.1"), ("alib", "1.2"), ("blib", "0.9")]  # one environment per release
    for count in (2, 3, 7):
        shards = [releases.report(plan, run(releases.shard_cells(plan.cells, i, count)), shard=(i, count), rlspec_commit="abc")
                  for i in range(count, 0, -1)]  # any order
        merged = releases.merge(shards)
        assert releases.comparable(merged) == releases.comparable(whole)
    statuses = [(c["adapter"], c["release"], c["seed"], c["status"]) for c in whole["cells"]]
    assert statuses[-1] == ("blib", "0.9", 0, "not-installable")
    assert [c["report"]["candidates"][0]["run"]["summary"]["fail"] for c in whole["cells"][:6]] == [0, 0, 1, 1, 0, 0]


def test_merge_refuses_what_is_not_one_plan_in_slices(stand_ins):
    plan, run, _ = stand_ins
    one = releases.report(plan, run(releases.shard_cells(plan.cells, 1, 2)), shard=(1, 2), rlspec_commit="abc")
    two = releases.report(plan, run(releases.shard_cells(plan.cells, 2, 2)), shard=(2, 2), rlspec_commit="abc")
    with pytest.raises(releases.ReleasesError, match="missing shard"):
        releases.merge([one])
    with pytest.raises(releases.ReleasesError, match="given twice"):
        releases.merge([one, one])
    with pytest.raises(releases.ReleasesError, match="another commit"):
        releases.merge([one, {**two, "commit": "def"}])
    with pytest.raises(releases.ReleasesError, match="another plan"):
        releases.merge([one, {**two, "plan": {**two["plan"], "cells": two["plan"]["cells"][:-1]}}])


def test_the_cli_merges_shard_files_into_the_history(stand_ins, tmp_path, capsys):
    plan, run, _ = stand_ins
    paths = []
    for i in (1, 2):
        data = releases.report(plan, run(releases.shard_cells(plan.cells, i, 2)), shard=(i, 2), rlspec_commit="abc", date="2026-01-02")
        paths.append(tmp_path / f"shard-{i}.json")
        paths[-1].write_text(json.dumps(data))
    out = tmp_path / "docs"
    assert main(["matrix", "merge", *map(str, paths), "--json", str(tmp_path / "merged.json"), "--out", str(out)]) == 0
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert merged["shard"] is None and len(merged["cells"]) == len(plan.cells)
    folder = out / history.FOLDER
    # one record per checked (release, profile, seed), the canonical name only for (ci, 0)
    assert sorted(p.name for p in (folder / "alib").glob("*.json")) == [
        "alib_1.0~quick-seed0.json", "alib_1.0~quick-seed1.json", "alib_1.1~quick-seed0.json", "alib_1.1~quick-seed1.json",
        "alib_1.2~quick-seed0.json", "alib_1.2~quick-seed1.json", "releases.json"]
    record = json.loads((folder / "alib" / "alib_1.1~quick-seed0.json").read_text())
    assert (record["release"], record["commit"], record["environment"], record["recorded"]) == ("1.1", "abc", {"alib": "1.1"}, "2026-01-02")
    assert record["profile"] == "quick" and record["seed"] == 0 and "python" not in record["report"]
    index = json.loads((folder / "alib" / "releases.json").read_text())
    assert index["range"] == ">=1.0" and list(index["releases"]) == ["0.5", "1.0", "1.1", "1.2"]
    assert index["releases"]["0.5"]["status"] == "outside-range"
    assert index["releases"]["1.1"]["runs"]["quick/seed1"]["summary"]["alib"]["fail"] == 1
    blib = json.loads((folder / "blib" / "releases.json").read_text())
    assert blib["releases"]["0.9"] == {"status": "not-installable", "environment": {}, "install_seconds": 1.0,
                                       "reason": "pins a torch other than this machine's CPU build"}
    loaded = history.load(folder, profile="quick", seed=0)
    assert [r["release"] for r in loaded["alib"]] == ["1.0", "1.1", "1.2"]  # releases.json is not a record
    assert history.load(folder, profile="ci", seed=0) == {}
    assert releases.load_indexes(folder)["blib"]["releases"]["0.9"]["status"] == "not-installable"
    # merging again changes no record (their bytes are left alone)
    before = {p: p.read_bytes() for p in folder.rglob("*.json")}
    assert main(["matrix", "merge", *map(str, paths), "--out", str(out)]) == 0
    assert {p: p.read_bytes() for p in folder.rglob("*.json")} == before
    # a narrower range later: the release now outside it loses its records, its index entry says why
    narrower = json.loads((tmp_path / "merged.json").read_text())
    narrower["plan"]["adapters"]["alib"].update(range=">=1.1", outside=["0.5", "1.0"], releases=["1.1", "1.2"])
    narrower["cells"] = [c for c in narrower["cells"] if c["release"] != "1.0"]
    releases.write_history(narrower, folder)
    assert not list((folder / "alib").glob("alib_1.0*"))
    assert json.loads((folder / "alib" / "releases.json").read_text())["releases"]["1.0"]["status"] == "outside-range"


@pytest.mark.parametrize("argv, message", [
    (["matrix", "--shard", "1/2"], "--shard, --list and --json belong to --releases"),
    (["matrix", "--releases", "all", "--adapters", "sb3", "--shard", "3/2", "--json", "x.json"], "expected I/N"),
    (["matrix", "--releases", "all", "--adapters", "sb3", "--shard", "1/2"], "--shard writes its report with --json"),
    (["matrix", "--releases", "2.0.0", "--adapters", "sb3,skrl"], "name one adapter"),
    (["matrix", "--releases", "all", "--python", "sb3=/x"], "--python does not apply"),
    (["matrix", "merge"], "matrix merge takes the shards' reports"),
    (["matrix", "--profile", "ci,quick"], "several profiles or seeds need --releases"),
    (["matrix", "--profile", "fast"], "each must be one of"),
    (["matrix", "--releases", "all", "--adapters", "sb3", "--seed", "x", "--list"], "--seed x"),
])
def test_release_arguments_that_cannot_run_are_usage_errors(argv, message, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_merge_of_a_file_that_is_not_a_report_is_refused(tmp_path, capsys):
    (tmp_path / "m.json").write_text(json.dumps({"schema": 1, "adapters": []}))
    assert main(["matrix", "merge", str(tmp_path / "m.json"), "--out", str(tmp_path)]) == 2
    assert "not a release-history report" in capsys.readouterr().err


def test_pip_s_conflict_over_torch_reads_as_not_installable_here():
    output = """Collecting torchrl==0.6.0
ERROR: Cannot install torchrl==0.6.0 because these package versions have conflicting dependencies.
The conflict is caused by:
    The user requested torch==2.13.0
    torchrl 0.6.0 depends on torch>=2.5.0,<2.6
    The user requested (constraint) torch==2.13.0
ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/"""
    reason = releases._pip_reason(output)
    assert reason.startswith("pins a torch other than this machine's CPU build")
    assert "torchrl 0.6.0 depends on torch>=2.5.0,<2.6" in reason


# ------------------------------------------------------------------------------------------------
# the affected releases of docs/bugs-found.md


def _record(adapter, release, statuses: dict[str, dict[str, str]]) -> dict:
    return {"adapter": adapter, "version": f"{adapter} {release}", "release": release, "profile": "quick", "seed": 0, "report": {"candidates": [
        {"candidate": cand, "run": {"clauses": [{"id": k, "status": v} for k, v in results.items()]}}
        for cand, results in statuses.items()]}}


def test_affected_releases_are_read_off_the_history():
    text = ("# Defects\n\n## 1. alib: truncation\n\nCells: `alib` GAE-TRUNCATION-BOOTSTRAP, GRID-*\n\nVersion: alib 1.4 · x\n\nBody.\n\n"
            "## 2. alib: other\n\nCells: `alib:variant` GAE-SEED-EXAMPLE\n\nBody.\n\n## Not a defect\n\n"
            "- a bullet\n  Cells: `alib` KL-X\n")
    hist = {"alib": [
        _record("alib", "1.0", {"alib": {"GAE-TRUNCATION-BOOTSTRAP": "pass", "GRID-A": "pass"}}),
        _record("alib", "1.1", {"alib": {"GAE-TRUNCATION-BOOTSTRAP": "fail", "GRID-A": "pass"}}),
        _record("alib", "1.2", {"alib": {"GAE-TRUNCATION-BOOTSTRAP": "pass", "GRID-A": "error"}}),
        _record("alib", "1.3", {"alib": {"GAE-TRUNCATION-BOOTSTRAP": "pass", "GRID-A": "pass"}, "alib:variant": {"GAE-SEED-EXAMPLE": "not-provided"}}),
        _record("alib", "1.4", {"alib": {"GAE-TRUNCATION-BOOTSTRAP": "fail"}, "alib:variant": {"GAE-SEED-EXAMPLE": "fail"}}),
    ]}
    indexes = {"alib": {"releases": {"0.9": {"status": "outside-range"}, "1.5": {"status": "not-installable"}}}}
    new = affected.rewrite(text, hist, indexes)
    first, second = [l for l in new.splitlines() if l.startswith("Affected releases")]
    assert first == ("Affected releases (docs/matrix-history, profile quick): `alib` 1.1 – 1.2, 1.4 (3 of 5 checked); "
                     "not affected: 1.0, 1.3; not checked here: 1.5")
    assert second == ("Affected releases (docs/matrix-history, profile quick): `alib` 1.4 (1 of 5 checked); "
                      "not provided: 1.0 – 1.3; not checked here: 1.5")
    assert "Version: alib 1.4 · x\n\nAffected releases" in new  # under the Version line
    assert "GAE-SEED-EXAMPLE\n\nAffected releases" in new  # no Version line: under the Cells line
    assert affected.rewrite(new, hist, indexes) == new  # idempotent
    assert affected.rewrite(new, {}, {}).count("not in the history") == 2
    assert new.count("Affected releases") == 2  # "Not a defect" bullets get none


def test_bugs_found_affected_releases_are_what_the_history_says():
    """docs/bugs-found.md's lines are generated: `rlspec matrix --affected docs/bugs-found.md` rewrites them."""
    folder = ROOT / "docs" / history.FOLDER
    text = (ROOT / "docs" / "bugs-found.md").read_text(encoding="utf-8")
    records = {adapter: history.series(r) for adapter, r in history.load(folder).items()}
    fresh = affected.rewrite(text, records, releases.load_indexes(folder))
    assert text == fresh, "docs/bugs-found.md's 'Affected releases' lines are stale: run `rlspec matrix --affected docs/bugs-found.md`"
    defects = {x.heading for x in bugs_found.explanations(text) if x.defect}
    assert sum(line.startswith("Affected releases") for line in text.splitlines()) == len(defects)


def test_the_release_history_is_the_run_configuration_most_records_share():
    """An adapter's history holds the release run (quick, say, one record per release) and the matrix's one record of
    its latest release (ci): the book and the affected releases read the release run."""
    quick = [{"version": f"lib {v}", "profile": "quick", "seed": 0} for v in ("1.0", "1.1", "1.2")]
    ci = [{"version": "lib 1.2", "profile": "ci", "seed": 0}]
    assert history.series(quick + ci) == quick
    assert history.series(ci + quick[:1]) == ci  # a tie goes to the matrix's own
    assert history.series([]) == []


"""The conformance matrix (checks/matrix/, `rlspec matrix`): discovery, merge, rendering, the
committed docs/conformance.md, and adapters whose library is not installed."""

import importlib.util
import json
from pathlib import Path

import pytest

from rlspec.checks import matrix, run_conformance
from rlspec.checks.cli import main

ROOT = Path(__file__).resolve().parents[1]
MUTANT = str(ROOT / "tests" / "mutants" / "gae_truncation_as_terminal.py")


def _candidate(spec, run, *, variant=None, version="lib 1.0"):
    return {"candidate": spec, "adapter": spec.partition(":")[0], "variant": variant, "description": "",
            "version": version, "conventions": {"ddof": 1}, "xfail": {}, "run": run.to_json()}


@pytest.fixture(scope="module")
def merged():
    good = run_conformance("reference", clauses="GAE-SEED-EXAMPLE,GAE-SEED-EXAMPLE-TRUNCATED,RETURNS-REWARD-TO-GO")
    bad = run_conformance(MUTANT, clauses="GAE-SEED-EXAMPLE,GAE-SEED-EXAMPLE-TRUNCATED,RETURNS-REWARD-TO-GO")
    declared = run_conformance(MUTANT, clauses="GAE-SEED-EXAMPLE-TRUNCATED",
                               xfail={"GAE-SEED-EXAMPLE-TRUNCATED": "by design, https://x"})
    reports = [
        {"adapter": "zlib", "available": False, "reason": "ModuleNotFoundError: No module named 'zlib_rl'", "candidates": []},
        {"adapter": "alib", "available": True, "candidates": [
            _candidate("alib", good), _candidate("alib:truncation_as_terminal", bad, variant="truncation_as_terminal")]},
        {"adapter": "blib", "available": True, "candidates": [_candidate("blib", declared)]},
    ]
    return matrix.merge(reports, profile="quick", seed=0)


def test_adapters_are_discovered_without_importing_them():
    names = matrix.adapters()
    assert {"sb3", "sb3_contrib", "skrl"} <= set(names)
    assert "reference" not in names and not any(n.startswith("_") for n in names)


def test_merge_orders_adapters_and_clauses(merged):
    assert [r["adapter"] for r in merged["adapters"]] == ["alib", "blib", "zlib"]
    assert merged["clauses"] == ["GAE-SEED-EXAMPLE", "GAE-SEED-EXAMPLE-TRUNCATED", "RETURNS-REWARD-TO-GO"]


def test_render_links_every_failure_to_its_counterexample(merged):
    text = matrix.render(merged)
    row = next(line for line in text.splitlines() if line.startswith("| `GAE-SEED-EXAMPLE-TRUNCATED`"))
    assert row == ("| `GAE-SEED-EXAMPLE-TRUNCATED` | pass | [**FAIL**](#alib-truncation_as_terminal-gae-seed-example-truncated) "
                   "| [xfail](#blib-gae-seed-example-truncated) |")
    assert '<a id="alib-truncation_as_terminal-gae-seed-example-truncated"></a>' in text
    assert "expected 1.25 at index 0, got 0.875" in text  # the counterexample itself
    assert "replay: rlspec check --candidate" in text
    assert "Declared deviation: by design, https://x" in text
    assert "| `zlib` | not installed: ModuleNotFoundError: No module named 'zlib_rl' |" in text
    assert "| `RETURNS-REWARD-TO-GO` | pass | – | · |" in text  # not provided; blib did not run that clause


def test_render_is_deterministic_and_free_of_timings(merged):
    assert matrix.render(merged) == matrix.render(json.loads(json.dumps(merged)))
    assert "seconds" not in matrix.render(merged)


def test_from_json_rerenders(tmp_path, merged, capsys):
    (tmp_path / "m.json").write_text(json.dumps(merged))
    assert main(["matrix", "--from-json", str(tmp_path / "m.json"), "--out", str(tmp_path / "new")]) == 0  # created
    assert (tmp_path / "new" / "conformance.md").read_text() == matrix.render(merged)


def test_committed_matrix_matches_its_json():
    """docs/conformance.md is generated from docs/conformance.json; neither is edited by hand."""
    data = json.loads((ROOT / "docs" / "conformance.json").read_text(encoding="utf-8"))
    assert (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8") == matrix.render(data)


@pytest.mark.skipif(importlib.util.find_spec("stable_baselines3") is not None, reason="SB3 is installed here")
def test_an_adapter_without_its_library_is_reported_not_dropped(tmp_path, capsys):
    report = matrix.check_adapter("sb3")
    assert report["available"] is False and "stable_baselines3" in report["reason"]
    code = main(["matrix", "--adapters", "sb3", "--out", str(tmp_path), "--require", "sb3"])
    assert code == 2 and "required adapters not installed: sb3" in capsys.readouterr().err
    assert "| `sb3` | not installed: ModuleNotFoundError" in (tmp_path / "conformance.md").read_text()


def test_unknown_adapter_and_bad_python_are_usage_errors(tmp_path, capsys):
    assert main(["matrix", "--adapters", "nope", "--out", str(tmp_path)]) == 2
    assert "no built-in adapter nope" in capsys.readouterr().err
    assert main(["matrix", "--python", "sb3", "--out", str(tmp_path)]) == 2
    assert main(["matrix", "--python", "nope=/x", "--out", str(tmp_path)]) == 2


def test_an_interpreter_that_cannot_run_is_reported(tmp_path):
    report = matrix._run_elsewhere("sb3", str(tmp_path / "no-python"), "quick", 0)
    assert report["available"] is False and "cannot run" in report["reason"]


def test_check_adapter_runs_the_adapter_and_its_variants(monkeypatch, tmp_path):
    """An importable adapter module (here a stand-in built from the reference and a mutant) is
    checked with each of its VARIANTS; version, conventions and xfail travel with the verdicts."""
    import sys
    import types

    from rlspec.checks.runner.loader import load

    reference, mutant = load("reference"), load(MUTANT)
    import importlib.machinery

    fake = types.ModuleType("rlspec.checks.adapters.fakelib")
    fake.__spec__ = importlib.machinery.ModuleSpec("rlspec.checks.adapters.fakelib", None)
    fake.__file__ = str(tmp_path / "fakelib.py")  # no fakelib.xfail beside it
    fake.gae = reference.operations["gae"]
    fake.RLSPEC_VERSION = "fakelib 1.2"
    fake.RLSPEC_CONVENTIONS = {"kl_estimate_kinds": ("k3", "k1")}
    fake.terminal = types.SimpleNamespace(__doc__="the  truncation-as-terminal\n mutant", gae=mutant.operations["gae"])
    fake.VARIANTS = ("terminal",)
    fake.RLSPEC_NOTE = "fakelib  removed its\n value loss"  # shown next to the adapter in the matrix
    monkeypatch.setitem(sys.modules, "rlspec.checks.adapters.fakelib", fake)
    report = matrix.check_adapter("fakelib", profile="quick", clauses="GAE-SEED-EXAMPLE,GAE-SEED-EXAMPLE-TRUNCATED")
    assert report["available"] is True
    base, variant = report["candidates"]
    assert (base["candidate"], variant["candidate"], variant["variant"]) == ("fakelib", "fakelib:terminal", "terminal")
    assert base["version"] == "fakelib 1.2" and base["conventions"] == {"kl_estimate_kinds": ["k1", "k3"]}
    assert variant["description"] == "the truncation-as-terminal mutant"
    assert base["description"] == "fakelib removed its value loss"
    text = matrix.render(matrix.merge([report], profile="quick", seed=0))
    assert "- `fakelib`: fakelib removed its value loss" in text
    assert [c["status"] for c in base["run"]["clauses"]] == ["pass", "pass"]
    assert [c["status"] for c in variant["run"]["clauses"]] == ["pass", "fail"]


def test_update_rechecks_some_adapters_and_keeps_the_rest(tmp_path, merged, capsys):
    (tmp_path / "m.json").write_text(json.dumps({**merged, "profile": "ci"}))
    code = main(["matrix", "--adapters", "sb3", "--update", str(tmp_path / "m.json"), "--out", str(tmp_path)])
    kept = json.loads((tmp_path / "conformance.json").read_text())
    assert code == 0 and [r["adapter"] for r in kept["adapters"]] == ["alib", "blib", "sb3", "zlib"]
    assert main(["matrix", "--adapters", "sb3", "--update", str(tmp_path / "m.json"), "--profile", "quick",
                 "--out", str(tmp_path)]) == 2

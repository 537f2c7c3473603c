"""The pytest11 plugin: one item per clause, verdicts mapped to pytest outcomes."""

from __future__ import annotations

from conftest import ROOT
from rlspec.checks import report  # noqa: F401  (imported here so pytester's in-process runs reuse
from rlspec.checks.registry import load_all  # them: numpy cannot be imported twice in one process)

load_all()

pytest_plugins = ["pytester"]


def runp(pytester, *args):
    """An inner pytest run isolated from this repository's ini file and from the outer coverage (and from
    pytest-benchmark, where installed: it warns inside a parallel run)."""
    pytester.makeini("[pytest]\n")
    ini = str(pytester.path / "tox.ini")
    return pytester.runpytest_inprocess("-c", ini, "--rootdir", str(pytester.path), "-p", "no:cacheprovider", "-p", "no:cov",
                                        "-p", "no:benchmark", *args)


def test_plugin_runs_one_item_per_clause(pytester):
    result = runp(pytester, "--rlspec-candidate", "reference", "--rlspec-only", "GAE-SEED-*")
    result.assert_outcomes(passed=2)


def test_plugin_reports_a_failing_clause(pytester):
    mutant = ROOT / "tests" / "mutants" / "gae_truncation_as_terminal.py"
    result = runp(pytester, "--rlspec-candidate", str(mutant), "--rlspec-only", "GAE-TRUNCATION-BOOTSTRAP,GAE-SEED-EXAMPLE")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*likely cause: a time-limit truncation is treated as a terminal state*"])


def test_node_ids_are_real_and_selectable_and_the_counts_add_up(pytester):
    """Items hang under the candidate's file: ``adapter.py::CLAUSE-ID`` selects one clause as any test is
    selected, and -k deselection prints real counts (never `collected 0 items / 138 deselected`)."""
    adapter = pytester.path / "adapter.py"
    adapter.write_text((ROOT / "tests" / "variants" / "gae_direct_sum.py").read_text())
    result = runp(pytester, "--rlspec-candidate", str(adapter), "--rlspec-only", "gae", "--collect-only", "-q")
    ids = [line for line in result.stdout.lines if "::" in line]
    assert ids and all(line.startswith("adapter.py::") for line in ids), result.stdout.lines
    result = runp(pytester, "--rlspec-candidate", str(adapter), "adapter.py::GAE-SEED-EXAMPLE")
    result.assert_outcomes(passed=1)
    result = runp(pytester, "--rlspec-candidate", str(adapter), "--rlspec-only", "gae", "-k", "GAE-SEED")
    result.assert_outcomes(passed=2)
    total = len(ids)
    result.stdout.fnmatch_lines([f"collected {total} items / {total - 2} deselected / 2 selected"])


def test_plugin_maps_not_provided_to_skip_and_xfail(pytester):
    xfail = pytester.path / "xfail.txt"
    xfail.write_text("GAE-TRUNCATION-BOOTSTRAP  # by design\n")
    mutant = ROOT / "tests" / "mutants" / "rtg_reward_shifted.py"
    result = runp(pytester, "--rlspec-candidate", str(mutant), "--rlspec-only", "GAE-TRUNCATION-BOOTSTRAP,RETURNS-*",
                                          "--rlspec-xfail", str(xfail))
    result.assert_outcomes(skipped=1, failed=1)


def test_plugin_is_silent_without_a_candidate(pytester):
    pytester.makepyfile("def test_x():\n    assert True\n")
    result = runp(pytester, "-p", "no:cacheprovider", "-p", "no:cov")
    result.assert_outcomes(passed=1)


def test_plugin_unloadable_candidate_is_a_usage_error(pytester):
    result = runp(pytester, "--rlspec-candidate", "no_such_module_xyz")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*rlspec: cannot load candidate 'no_such_module_xyz'*"])


def test_header_names_the_candidate(pytester):
    result = runp(pytester, "--rlspec-candidate", "reference", "--rlspec-only", "GAE-SEED-EXAMPLE")
    result.stdout.fnmatch_lines(["rlspec: candidate reference, profile quick, seed 0, float64"])

"""The pytest11 plugin: one item per clause, verdicts mapped to pytest outcomes."""

from __future__ import annotations

import pytest

from conftest import ROOT
from rlspec.checks import report# noqa: F401  (imported here so pytester's in-process runs reuse
from rlspec.checks.runner.chapters import load_all  # them: numpy cannot be imported twice in one process)

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


def test_plugin_reports_an_xfail_on_a_passing_clause_as_pytest_does_an_unexpected_pass(pytester):
    """An xfail-declared clause that conforms is pytest's XPASS (not a plain pass); strict makes it a failure,
    by rlspec's flag or by pytest's own xfail_strict ini option."""
    xfail = pytester.path / "xfail.txt"
    xfail.write_text("GAE-SEED-EXAMPLE  # thought broken upstream\n")
    args = ["--rlspec-candidate", "reference", "--rlspec-only", "GAE-SEED-EXAMPLE", "--rlspec-xfail", str(xfail), "-rX"]
    result = runp(pytester, *args)
    result.assert_outcomes(xpassed=1)
    result.stdout.fnmatch_lines(["XPASS *GAE-SEED-EXAMPLE*thought broken upstream*"])
    assert result.ret == 0
    result = runp(pytester, *args, "--rlspec-xfail-strict")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*[[]XPASS(strict)[]] thought broken upstream: GAE-SEED-EXAMPLE is declared*"])
    pytester.makeini("[pytest]\nxfail_strict = true\n")
    strict_ini = pytester.runpytest_inprocess("-c", str(pytester.path / "tox.ini"), "--rootdir", str(pytester.path),
                                              "-p", "no:cacheprovider", "-p", "no:cov", "-p", "no:benchmark", *args)
    strict_ini.assert_outcomes(failed=1)


def test_plugin_reads_tool_rlspec_as_the_command_line_does(pytester):
    """``[tool.rlspec]`` applies to the plugin: the candidate (``--rlspec`` runs it), the clauses, a declared
    precision, an xfail table and xfail-strict; a command-line option wins; the errors are the CLI's one line."""
    (pytester.path / "adapter.py").write_text((ROOT / "tests" / "precision" / "gae_float32_arithmetic.py").read_text())
    pyproject = pytester.path / "pyproject.toml"
    pyproject.write_text('[tool.rlspec]\ncandidate = "adapter.py"\nonly = ["GAE-SEED-EXAMPLE", "GAE-LAMBDA-MIXTURE"]\n'
                         'precision = {gae = "float32"}\n')
    result = runp(pytester, "--rlspec")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"rlspec: candidate {pytester.path / 'adapter.py'}, profile quick, seed 0, float64 "
                                 f"({pyproject})"])
    pyproject.write_text('[tool.rlspec]\ncandidate = "adapter.py"\nonly = "GAE-LAMBDA-MIXTURE"\n')  # undeclared: fails
    runp(pytester, "--rlspec").assert_outcomes(failed=1)
    runp(pytester, "--rlspec", "--rlspec-only", "GAE-SEED-EXAMPLE").assert_outcomes(passed=1)  # the option wins
    pyproject.write_text('[tool.rlspec]\ncandidate = "adapter.py"\nonly = "GAE-SEED-EXAMPLE"\n'
                         'xfail = {"GAE-SEED-EXAMPLE" = "a known deviation"}\nxfail-strict = true\n')
    failed = runp(pytester, "--rlspec")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*[[]XPASS(strict)[]] a known deviation*"])
    pyproject.write_text('[tool.rlspec]\ncandidat = "adapter.py"\n')
    result = runp(pytester, "--rlspec")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*rlspec: {pyproject}: [[]tool.rlspec[]] has no key 'candidat'; did you mean 'candidate'?*"])
    pyproject.write_text('[tool.rlspec]\ncandidate = "adapter.py"\nprecision = {gea = "float32"}\n')
    result = runp(pytester, "--rlspec-candidate", "reference")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*rlspec: {pyproject}: [[]tool.rlspec[]]*gea*"])


def test_plugin_without_a_candidate_anywhere_says_so(pytester):
    result = runp(pytester, "--rlspec")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*rlspec: --rlspec needs a candidate*"])

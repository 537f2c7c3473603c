"""The command line: exit codes, the table, the JSON and JUnit reports, --only, --xfail, list,
explain, prove."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import MUTANTS, ROOT, VARIANTS, mutant_metadata
from rlspec.checks import load
from rlspec.checks.cli import main
from rlspec.spec import catalogue

TRUNCATION_MUTANT = str(ROOT / "tests" / "mutants" / "gae_truncation_as_terminal.py")
GAE_MUTANTS = [m for m in MUTANTS if m.stem.startswith("gae_")]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_reference_exits_0_with_a_row_per_clause(capsys):
    code, out, _ = run(capsys, "check")
    assert code == 0
    for clause in catalogue.clauses():
        assert clause.id in out
    assert out.splitlines()[0].startswith("rlspec 0.1.0 · candidate reference · profile quick · seed 0")
    assert out.rstrip().splitlines()[-1].startswith(f"{len(catalogue.clauses())} clauses: {len(catalogue.clauses())} pass")


def test_json_report_format(capsys, tmp_path):
    path = tmp_path / "out.json"
    code, _, _ = run(capsys, "check", "--only", "GAE-SEED-*", "--json", str(path))
    report = json.loads(path.read_text())
    assert code == 0
    assert set(report) >= {"rlspec", "candidate", "profile", "seed", "clauses", "summary"}
    assert report["candidate"] == "reference" and report["seed"] == 0 and report["profile"] == "quick"
    assert [c["id"] for c in report["clauses"]] == ["GAE-SEED-EXAMPLE", "GAE-SEED-EXAMPLE-TRUNCATED"]
    for clause in report["clauses"]:
        assert set(clause) >= {"id", "operation", "status", "message", "counterexample"}
        assert clause["operation"] == "gae" and clause["status"] == "pass"
    assert report["summary"]["pass"] == 2 and sum(report["summary"].values()) == 2


def test_json_to_stdout_moves_the_table_to_stderr(capsys):
    code, out, err = run(capsys, "check", "--only", "GAE-SEED-EXAMPLE", "--json", "-")
    assert code == 0 and json.loads(out)["summary"]["pass"] == 1
    assert "GAE-SEED-EXAMPLE" in err


@pytest.mark.parametrize("mutant", GAE_MUTANTS, ids=[m.stem for m in GAE_MUTANTS])
def test_each_gae_mutant_exits_1_with_a_failing_gae_clause(capsys, tmp_path, mutant):
    path = tmp_path / "out.json"
    clauses = ",".join(mutant_metadata(mutant)["clauses"])
    code, out, _ = run(capsys, "check", "--candidate", str(mutant), "--only", clauses, "--json", str(path))
    report = json.loads(path.read_text())
    assert code == 1
    failing = [c for c in report["clauses"] if c["status"] == "fail"]
    assert failing and all(c["operation"] == "gae" for c in failing)
    assert "replay: rlspec check --candidate" in out


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.stem for v in VARIANTS])
def test_each_variant_exits_0(capsys, variant):
    """Loaded by the command line in its isolated workers, each variant exits 0. One clause per operation it
    provides: that every clause passes is tests/test_variants.py's (in this process, the same verdicts as in
    workers: tests/test_isolation.py), so all of them here would run that again (about a minute of the suite)."""
    provided = load(str(variant)).operations
    first = {}
    for clause in catalogue.clauses():
        operations = [clause.operation] if isinstance(clause.operation, str) else clause.operation
        for operation in operations:
            if operation in provided and clause.id != "GAE-FLOAT32-LONG-ROLLOUT":
                first.setdefault(operation, clause.id)
    assert set(first) == set(provided)
    code, out, _ = run(capsys, "check", "--candidate", str(variant), "--only", ",".join(sorted(set(first.values()))))
    assert code == 0 and f"{len(set(first.values()))} pass" in out


def test_junit_report(capsys, tmp_path):
    path = tmp_path / "junit.xml"
    code, _, _ = run(capsys, "check", "--candidate", TRUNCATION_MUTANT, "--only", "gae", "--junit", str(path))
    suite = ET.parse(path).getroot()
    assert code == 1 and suite.tag == "testsuite"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["GAE-TRUNCATION-BOOTSTRAP"].find("failure") is not None
    assert cases["GAE-SEED-EXAMPLE"].find("failure") is None
    assert int(suite.get("failures")) >= 1


def test_xfail_file_turns_a_declared_failure_into_xfail(capsys, tmp_path):
    xfail = tmp_path / "xfail.txt"
    xfail.write_text(
        "GAE-TRUNCATION-BOOTSTRAP  # https://example.org/issue/1 truncation is terminal by design\n"
        "GAE-SEED-EXAMPLE-TRUNCATED  # same\n"
    )
    code, out, _ = run(capsys, "check", "--candidate", TRUNCATION_MUTANT,
                       "--only", "GAE-TRUNCATION-BOOTSTRAP,GAE-SEED-EXAMPLE-TRUNCATED", "--xfail", str(xfail))
    assert code == 0 and "xfail" in out


def test_xfail_entry_that_conforms_is_reported(capsys, tmp_path):
    xfail = tmp_path / "xfail.txt"
    xfail.write_text("GAE-SEED-EXAMPLE\n")
    path = tmp_path / "out.json"
    code, out, _ = run(capsys, "check", "--only", "GAE-SEED-EXAMPLE", "--xfail", str(xfail), "--json", str(path))
    report = json.loads(path.read_text())
    assert code == 0 and "has no '# reason'" in out
    assert "conforms: the xfail entry can go" in report["clauses"][0]["notes"][0]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["check", "--candidate", "no_such_module_xyz"], "rlspec: cannot load candidate 'no_such_module_xyz': No module named 'no_such_module_xyz'"),
        (["check", "--candidate", "missing_file.py"], "rlspec: no such file: missing_file.py"),
        (["check", "--only", "NOPE-*"], "rlspec: --only entry 'NOPE-*' matches no clause id, glob or chapter (see `rlspec list`)"),
        (["check", "--xfail", "/nonexistent/xfail.txt"], "rlspec: cannot read --xfail file /nonexistent/xfail.txt: No such file or directory"),
        (["check", "-n", "0"], "rlspec: -n WORKERS must be at least 1"),
        (["check", "--device", "tpu"], "rlspec: unknown --device 'tpu'; use cpu or cuda"),
        (["explain", "GAE-NOPE"], "rlspec: no clause 'GAE-NOPE'; did you mean one of"),
        (["prove", "--only", "nothing.*"], "rlspec: --only 'nothing.*' matches no proof"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith(message) and err.count("\n") == 1


def test_no_command_prints_help(capsys):
    code, out, _ = run(capsys)
    assert code == 2 and "check" in out


def test_list_formats(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0 and "GAE-TRUNCATION-BOOTSTRAP" in out
    code, out, _ = run(capsys, "list", "--format", "json")
    entries = json.loads(out)
    assert {e["id"] for e in entries} == {c.id for c in catalogue.clauses()}
    assert all(e["checks"] for e in entries)
    first = next(e for e in entries if e["id"] == "GAE-SEED-EXAMPLE")
    assert first["sources"][0] == {"proof": "gae.seed_example", "cite": "rlspec proof gae.seed_example (spec/proofs/gae.py)",
                                   "url": "spec/proofs/gae.py"}
    assert {"ref": "gae", "where": first["sources"][1]["where"]}.items() <= first["sources"][1].items()
    assert first["sources"][1]["url"] == "https://arxiv.org/abs/1506.02438" and first["bugs"] == ["B1", "B12"]


def test_list_bugs_formats(capsys):
    code, out, _ = run(capsys, "list", "--bugs")
    assert code == 0 and "B3" in out and "sb3-onpolicy-timeout-treated-as-terminal" in out
    code, out, _ = run(capsys, "list", "--bugs", "--format", "json")
    entries = {e["id"]: e for e in json.loads(out)}
    assert set(entries) == set(catalogue.bugs())
    assert entries["B3"]["links"][0] == "https://github.com/DLR-RM/stable-baselines3/issues/633"
    assert "GAE-TRUNCATION-BOOTSTRAP" in entries["B3"]["clauses"]


def test_explain_prints_sources_and_bugs_with_their_links(capsys):
    code, out, _ = run(capsys, "explain", "GAE-TRUNCATION-BOOTSTRAP")
    assert code == 0
    for expected in ("Time Limits in Reinforcement Learning", "https://arxiv.org/abs/1712.00378",
                     "stable-baselines3 2.9.2, stable_baselines3/common/on_policy_algorithm.py",
                     "real bugs it targets (spec/bugs.toml):", "B3 sb3-onpolicy-timeout-treated-as-terminal",
                     "https://github.com/DLR-RM/stable-baselines3/pull/658"):
        assert expected in out


def test_explain_shows_statement_proof_reference_and_checks(capsys):
    code, out, _ = run(capsys, "explain", "gae-lambda-mixture")
    assert code == 0
    for expected in ("GAE-LAMBDA-MIXTURE", "proof gae.geometric_collapse: proved", "assumptions:",
                     "reference rlspec.reference.gae.gae:", "def gae(", "checks:", "rlspec.checks.clauses.gae:lambda_mixture"):
        assert expected in out


def test_prove_reports_every_proof(capsys):
    code, out, _ = run(capsys, "prove")
    assert code == 0 and "not proved" in out and " 0 not proved" in out


def test_prove_on_workers_prints_what_one_process_prints(capsys):
    """The proofs run on forked workers by default; the lines (times aside) and their order do not depend on it."""
    def lines(*workers):
        code, out, _ = run(capsys, "prove", "--only", "kl.*", *workers)
        assert code == 0
        return [line.split()[:2] for line in out.splitlines()[:-1]]

    assert lines("-n", "2") == lines("-n", "1") and len(lines("-n", "1")) > 2


def test_console_script_is_installed():
    beside = Path(sys.executable).parent / "rlspec"  # the script of the environment running the tests
    script = str(beside) if beside.exists() else "rlspec"
    done = subprocess.run([script, "check", "--only", "GAE-SEED-EXAMPLE"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "rlspec.checks.cli", "list"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "GAE-SEED-EXAMPLE" in done.stdout


def test_the_console_script_exits_without_teardown_but_runs_atexit_and_flushes():
    """``run`` ends the process without Python's teardown (0.4 s with torch loaded): what the teardown would do
    that matters still happens (atexit handlers, coverage's among them; buffered output through a pipe), the exit
    code is main's, and a running thread that is not a daemon is waited for, as Python's own exit would."""
    script = ("import atexit, sys, threading, time\n"
              "atexit.register(lambda: print('atexit handler ran'))\n"
              "if sys.argv[1] == 'thread':\n"
              "    threading.Thread(target=lambda: (time.sleep(0.5), print('thread finished'))).start()\n"
              "sys.argv = ['rlspec'] + sys.argv[2:]\n"
              "from rlspec.checks.cli import run\n"
              "run()\n")
    done = subprocess.run([sys.executable, "-c", script, "plain", "list"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "GAE-SEED-EXAMPLE" in done.stdout and done.stdout.rstrip().endswith("atexit handler ran")
    done = subprocess.run([sys.executable, "-c", script, "plain", "list", "--bogus"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    done = subprocess.run([sys.executable, "-c", script, "thread", "list"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "thread finished" in done.stdout and "atexit handler ran" in done.stdout


def test_check_imports_hypothesis_without_its_plugins_and_leaves_the_environment_alone():
    """A Hypothesis entry-point plugin can register strategies or backends (what a seed draws would depend on the
    install) and costs import time (trio's, which selenium brings, imports pytest): the command line imports
    Hypothesis with plugins off, and the variable it sets for that is gone before any candidate runs."""
    script = ("import os, sys\n"
              "from rlspec.checks.cli import main\n"
              "code = main(['check', '--only', 'GAE-SEED-EXAMPLE', '--no-isolation'])\n"
              "print(code, os.environ.get('HYPOTHESIS_NO_PLUGINS'), 'trio' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "HYPOTHESIS_NO_PLUGINS"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 None False"  # trio is installed here (selenium's), never imported


def test_objects_and_in_memory_modules_are_candidates():
    """run_conformance takes any object with protocol operations as attributes, with no file behind it."""
    import types

    from rlspec.checks import run_conformance
    from rlspec.reference import gae as reference_gae

    namespace = types.SimpleNamespace(gae=reference_gae.gae)
    module = types.ModuleType("in_memory_candidate")
    module.gae = reference_gae.gae
    for candidate in (namespace, module):
        assert run_conformance(candidate, clauses="GAE-SEED-EXAMPLE").ok

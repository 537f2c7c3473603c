"""Hostile and broken candidates (tests/bad/): whatever a candidate does, rlspec finishes, writes its
report, and gives each clause a verdict that says what happened. Each case is pinned to its exact
verdict and message, as Gymnasium's checker tests pin broken environments."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import BAD, ROOT
from rlspec.checks import run_conformance
from rlspec.checks.cli import main
from rlspec.checks.loader import LoadError

BAD_DIR = ROOT / "tests" / "bad"
ONE = "GAE-SEED-EXAMPLE"


def bad(name: str) -> str:
    return str(BAD_DIR / f"{name}.py")


def verdict(name: str, clause: str = ONE, **options):
    result = run_conformance(bad(name), clauses=[clause], **options)[clause]
    return result.status, result.message


# (fixture, in-process verdict and message on GAE-SEED-EXAMPLE)
IN_PROCESS = [
    ("raises_at_call", "error", "gae raised ValueError: not implemented for this input"),
    ("returns_none", "error", "gae returned None; expected a tuple of 2 arrays"),
    ("returns_scalar", "error", "gae returned a float (0.0); expected a tuple of 2 arrays"),
    ("wrong_shape", "error", "gae output 0 has shape (5,); expected (4,)"),
    ("wrong_dtype", "error", "gae output 0 has dtype int64; expected a floating dtype"),
    ("returns_lists", "error", "gae output 0 is a list of length 4; expected an array"),
    ("wrong_tuple_length", "error", "gae returned a tuple of length 1; expected a tuple of 2 arrays"),
    ("returns_nan", "error", "gae output 0 is nan at index (0,) on finite input"),
    ("returns_inf", "error", "gae output 0 is inf at index (0,) on finite input"),
    ("mutates_numpy", "error", "gae mutated its input `values` in place at index (0,)"),
    ("mutates_torch", "error", "gae mutated its input `rewards` in place at index (0,)"),
    ("changes_default_dtype", "error", "gae changed global state: torch default dtype torch.float32 -> torch.float64 (restored)"),
    ("disables_grad", "error", "gae changed global state: torch grad mode True -> False (restored)"),
    ("exits", "error", "gae raised SystemExit: 3"),
    ("exhausts_memory", "error", "gae raised MemoryError (out of memory)"),
    ("prints", "pass", ""),
    ("reseeds_and_sets_env", "pass", ""),
]


@pytest.mark.parametrize("name, status, message", IN_PROCESS, ids=[c[0] for c in IN_PROCESS])
def test_bad_candidate_verdict(name, status, message):
    assert verdict(name) == (status, message)


def test_nondeterminism_is_detected():
    status, message = verdict("nondeterministic")
    assert status == "error"
    assert message.startswith("gae is nondeterministic: two calls with the same input gave gae output 0 ")


def test_raising_on_some_inputs_only_gives_the_input():
    result = run_conformance(bad("raises_on_truncation"), clauses=["GAE-SEED-EXAMPLE", "GAE-TRUNCATION-BOOTSTRAP"])
    assert result["GAE-SEED-EXAMPLE"].status == "pass"
    assert (result["GAE-TRUNCATION-BOOTSTRAP"].status, result["GAE-TRUNCATION-BOOTSTRAP"].message) == (
        "error", "gae raised NotImplementedError: truncation")


def test_mutation_is_a_failure_of_the_dedicated_clause():
    result = run_conformance(bad("mutates_numpy"), clauses=["GAE-INPUTS-NOT-MUTATED"])["GAE-INPUTS-NOT-MUTATED"]
    assert result.status == "fail"
    assert result.message == "gae mutated its input `values` in place at index (0,)"
    assert "before 0.5, after 1.0" in result.counterexample


def test_global_state_is_restored_and_reported():
    import numpy as np
    import torch

    np.random.seed(123)
    expected = np.random.get_state()[1].copy()
    os.environ.pop("RLSPEC_BAD_CANDIDATE", None)
    result = run_conformance(bad("reseeds_and_sets_env"), clauses=[ONE])[ONE]
    assert result.status == "pass"
    assert result.notes == ["gae changed global state (restored): numpy global RNG, environment variables "
                            "(RLSPEC_BAD_CANDIDATE), torch RNG, warnings filters"]
    assert (np.random.get_state()[1] == expected).all()
    assert "RLSPEC_BAD_CANDIDATE" not in os.environ
    assert torch.get_default_dtype() == torch.float32 and torch.is_grad_enabled()


def test_prints_never_reach_the_reports(capsys, tmp_path):
    code = main(["check", "--candidate", bad("prints"), "--only", ONE, "--json", "-", "--no-isolation"])
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out)["summary"]["pass"] == 1  # stdout is exactly the JSON report
    assert "gae called" not in out + err and "not json" not in out + err


# --- isolated (worker processes): hangs, crashes, native code -------------------------------

ISOLATED = [
    ("hangs_python", "error", "timed out after 2 s"),
    ("hangs_sleep", "error", "timed out after 2 s"),
    ("hangs_native", "error", "timed out after 2 s"),
    ("segfaults", "error", "the candidate crashed the worker process (killed by SIGSEGV)"),
    ("hard_exits", "error", "the candidate crashed the worker process (exit code 7)"),
    ("exhausts_memory", "error", "gae raised MemoryError (out of memory)"),
    ("raises_at_call", "error", "gae raised ValueError: not implemented for this input"),
]


@pytest.mark.parametrize("name, status, message", ISOLATED, ids=[c[0] for c in ISOLATED])
def test_isolated_verdict(name, status, message):
    assert verdict(name, isolate=True, time_limit=2) == (status, message)


def test_the_run_goes_on_after_a_timeout():
    run = run_conformance(bad("hangs_on_lambda_zero"), clauses=["GAE-SEED-EXAMPLE", "GAE-TD-ERROR-AT-LAMBDA-0",
                                                                "GAE-SEED-EXAMPLE-TRUNCATED"], isolate=True, time_limit=2)
    assert [(r.id, r.status) for r in run.results] == [
        ("GAE-SEED-EXAMPLE", "pass"), ("GAE-SEED-EXAMPLE-TRUNCATED", "pass"), ("GAE-TD-ERROR-AT-LAMBDA-0", "error")]
    assert run["GAE-TD-ERROR-AT-LAMBDA-0"].message == "timed out after 2 s"


@pytest.mark.parametrize(
    "name, message",
    [
        ("raises_at_import", "cannot load candidate '{path}': RuntimeError while importing: broken on import"),
        ("hangs_at_import", "cannot load candidate: timed out after 2 s while importing it"),
    ],
)
def test_unloadable_candidates(name, message):
    with pytest.raises(LoadError) as info:
        run_conformance(bad(name), clauses=[ONE], isolate=True, time_limit=2)
    assert str(info.value) == message.format(path=bad(name))


def test_workers_give_the_same_verdicts_in_catalogue_order():
    one = run_conformance("reference", isolate=True, workers=1)
    two = run_conformance("reference", isolate=True, workers=2)
    strip = lambda run: [{k: v for k, v in c.items() if k != "seconds"} for c in run.to_json()["clauses"]]
    assert strip(one) == strip(two)


def test_ctrl_c_leaves_a_valid_report_marked_incomplete(tmp_path):
    report = tmp_path / "out.json"
    command = [sys.executable, "-m", "rlspec.checks.cli", "check", "--candidate", bad("hangs_on_lambda_zero"),
               "--only", "GAE-SEED-EXAMPLE,GAE-TD-ERROR-AT-LAMBDA-0", "--json", str(report), "--time-limit", "60"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and '"GAE-SEED-EXAMPLE"' not in (report.read_text() if report.exists() else ""):
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=30)
    data = json.loads(report.read_text())
    assert process.returncode == 130
    assert data["incomplete"] is True
    assert [c["id"] for c in data["clauses"]] == ["GAE-SEED-EXAMPLE"]
    assert "interrupted: 1 of 2 clauses finished" in data["warnings"]


def test_same_seed_gives_byte_identical_json(tmp_path):
    outputs = []
    for i in range(2):
        path = tmp_path / f"run{i}.json"
        assert main(["check", "--json", str(path)]) == 0
        data = json.loads(path.read_text())
        data.pop("seconds")
        for clause in data["clauses"]:
            clause.pop("seconds")
        outputs.append(json.dumps(data, sort_keys=True))
    assert outputs[0] == outputs[1]


def test_the_suite_writes_nothing_and_opens_no_connection(tmp_path, monkeypatch):
    candidate = tmp_path / "candidate.py"
    candidate.write_text("from rlspec.reference.gae import gae\n")
    monkeypatch.chdir(tmp_path)

    def refuse(*args, **kwargs):
        raise AssertionError("rlspec opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    assert run_conformance(str(candidate)).ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["candidate.py"]


def test_every_bad_fixture_has_a_pinned_verdict():
    pinned = {c[0] for c in IN_PROCESS} | {c[0] for c in ISOLATED} | {
        "nondeterministic", "raises_on_truncation", "raises_at_import", "hangs_at_import", "hangs_on_lambda_zero"}
    assert {p.stem for p in BAD} == pinned

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
from rlspec.checks.runner.loader import LoadError

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


def test_a_call_is_written_as_it_was_made_whatever_happens_to_its_arguments_later():
    """A call's code (the replay a message prints) is written only when a message reads it, from copies taken
    before the call: the same text as writing it then, for every kind of argument, even when the arguments
    are changed afterwards. The mutation check compares bytes first: it still sees every change of value, and
    a -0.0 written over 0.0 (the same value, other bytes) is still no mutation."""
    import numpy as np
    import torch

    from rlspec.checks.kit.context import MutatedInput, _to_numpy, call_writer, format_call
    from rlspec.checks.runner import protocol
    from rlspec.reference.gae import gae as exact

    args = {"a": np.array([1.5, -0.0, np.nan, np.inf]), "b": np.array([[1, 2], [3, 4]], dtype=np.float32),
            "c": np.array([True, False]), "d": np.zeros(100), "e": torch.tensor([1.0, 2.0], requires_grad=True),
            "f": torch.tensor([0.1, 0.2], dtype=torch.bfloat16), "g": torch.zeros(70), "h": 0.5, "i": "mean",
            "j": np.float32(0.25), "k": [1, 2], "l": None, "m": torch.tensor([1, 2])}
    copies = {k: _to_numpy(v).copy() if isinstance(v, np.ndarray) or torch.is_tensor(v) else None for k, v in args.items()}
    written, expected = call_writer("op", args, copies), format_call("op", args)
    with torch.no_grad():
        args["a"][0], args["e"][0], args["f"][0], args["k"][0] = 9.0, 7.0, 3.0, 5
    assert written() == expected

    def flips_zeros(**kw):
        kw["values"][kw["values"] == 0] = 0.0  # -0.0 becomes 0.0
        return exact(**kw)

    def halves(**kw):
        kw["values"] /= 2
        return exact(**kw)

    rollout = {"rewards": np.array([1.0, 0.5]), "values": np.array([-0.0, 0.5]), "next_values": np.array([0.5, 0.0]),
               "terminated": np.array([False, True]), "truncated": np.array([False, False]), "gamma": 0.9, "lam": 0.8}
    made = protocol.Candidate("inline", "inline", {"gae": flips_zeros})
    call = protocol.call(made, "gae", rollout, outputs=2, shape=(2,))
    assert call.code == format_call("gae", {**rollout, "values": np.array([-0.0, 0.5])}) and "values=np.array([-0.0, 0.5])" in call.code
    with pytest.raises(MutatedInput, match=r"gae mutated its input `values` in place at index \(1,\)"):
        protocol.call(protocol.Candidate("inline", "inline", {"gae": halves}), "gae", rollout, outputs=2, shape=(2,))


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
    ("hangs_python", "error", "gae timed out after 2 s"),
    ("hangs_sleep", "error", "gae timed out after 2 s"),
    ("hangs_native", "error", "gae timed out after 2 s"),
    ("segfaults", "error", "gae crashed the worker process (killed by SIGSEGV)"),
    ("hard_exits", "error", "gae crashed the worker process (exit code 7)"),
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
    assert run["GAE-TD-ERROR-AT-LAMBDA-0"].message == "gae timed out after 2 s"


# --- a hang or a crash costs once: later clauses of the operation are not retried ------------

GAE_ONLY = "GAE-*,GRID-GAE-*"


@pytest.mark.parametrize("name, first, rest", [
    ("hangs_sleep", "gae timed out after 2 s", "gae timed out on GAE-SEED-EXAMPLE (after 2 s); not retried"),
    ("segfaults", "gae crashed the worker process (killed by SIGSEGV)",
     "gae crashed the worker process on GAE-SEED-EXAMPLE (killed by SIGSEGV); not retried"),
])
def test_a_broken_operation_costs_one_clause(name, first, rest):
    """One clause waits out the limit (or loses its worker); every later clause of that operation gets an
    immediate error naming the clause it broke on, instead of a limit each (19 x 30 s at quick before)."""
    run = run_conformance(bad(name), clauses=GAE_ONLY, isolate=True, time_limit=2)
    assert len(run.results) > 10
    assert (run.results[0].id, run.results[0].status, run.results[0].message) == ("GAE-SEED-EXAMPLE", "error", first)
    assert {(r.status, r.message) for r in run.results[1:]} == {("error", rest)}
    assert all(r.seconds == 0 for r in run.results[1:])


def test_other_operations_still_run_after_one_hangs(tmp_path):
    """The blame falls on the operation that was running: a candidate whose gae hangs still gets verdicts
    for its rewards_to_go, on two workers (one of them lost to the hang)."""
    candidate = tmp_path / "half_hangs.py"
    candidate.write_text("import time\nfrom rlspec.reference.returns import rewards_to_go\n\n\n"
                         "def gae(rewards, values, next_values, terminated, truncated, gamma, lam):\n"
                         "    time.sleep(10**6)\n")
    run = run_conformance(str(candidate), clauses="GAE-SEED-EXAMPLE*,RETURNS-*", isolate=True, workers=2, time_limit=2)
    by_status = {}
    for r in run.results:
        by_status.setdefault((r.operation, r.status), []).append(r.id)
    assert by_status[("gae", "error")] == ["GAE-SEED-EXAMPLE", "GAE-SEED-EXAMPLE-TRUNCATED"]
    assert by_status[("rewards_to_go", "pass")]
    assert not [k for k in by_status if k[0] == "rewards_to_go" and k[1] != "pass"]


def test_a_hang_outside_candidate_calls_blames_the_clauses_one_operation(tmp_path):
    """kl_penalty returns promptly, but the backward pass through the graph it built never ends: no
    candidate call is running when the time is up, so the clause's one operation takes the blame."""
    candidate = tmp_path / "slow_backward.py"
    candidate.write_text(
        "import time\nimport torch\nfrom rlspec.reference.grpo import kl_penalty as exact\n\nRLSPEC_ARRAY = 'torch'\n\n\n"
        "class Stuck(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x.clone()\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        time.sleep(10**6)\n\n\n"
        "def kl_penalty(logp, logp_ref, kind, logp_old=None):\n"
        "    return Stuck.apply(exact(logp, logp_ref, kind, logp_old))\n")
    run = run_conformance(str(candidate), clauses="KL-PENALTY-*", isolate=True, time_limit=2)
    stuck = [r for r in run.results if r.message == "timed out after 2 s"]
    assert len(stuck) == 1
    later = run.results[run.results.index(stuck[0]) + 1:]
    assert later and {r.message for r in later if r.status == "error"} == {
        f"kl_penalty timed out on {stuck[0].id} (after 2 s); not retried"}


def test_blame_rule():
    from rlspec.checks.runner.worker import blame

    assert blame("gae", ("gae",)) == "gae"
    assert blame("gae", ("ppo_loss", "gae")) == "gae"  # the operation running wins
    assert blame(None, ("kl_penalty",)) == "kl_penalty"  # between calls: the clause's one operation
    assert blame(None, ("ppo_loss", "gae")) is None  # between calls of a clause of several: nobody


def test_the_marker_follows_candidate_calls():
    """The shared word reads the operation while its code runs and 0 once it returned (or raised)."""
    import multiprocessing

    from rlspec.checks import Candidate
    from rlspec.checks.runner.worker import _marked

    inside = multiprocessing.get_context().RawValue("i", 0)
    seen = {}
    names = ["gae", "rewards_to_go"]

    def gae(**kw):
        seen["gae"] = inside.value
        raise ValueError("boom")

    def rewards_to_go(**kw):
        seen["rewards_to_go"] = inside.value
        return 1.0

    candidate = _marked(Candidate("x", "x", {"gae": gae, "rewards_to_go": rewards_to_go}), inside)
    assert candidate.operations["rewards_to_go"]() == 1.0
    with pytest.raises(ValueError):
        candidate.operations["gae"]()
    assert seen == {name: names.index(name) + 1 for name in names} and inside.value == 0


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


def test_auto_workers_is_one_per_usable_core():
    from rlspec.checks.cli import AUTO_WORKERS_MAX, _workers, usable_cores

    assert _workers("auto") == min(usable_cores(), AUTO_WORKERS_MAX) >= 1
    assert _workers("3") == 3
    assert main(["check", "-n", "auto", "--only", "GAE-SEED-EXAMPLE*"]) == 0


# --- stopping the run: Ctrl-C, SIGTERM, SIGKILL; no worker outlives it ------------------------

HANGS_WHEN_LAMBDA_IS_ZERO = """\
import os
import time

from rlspec.reference.gae import gae as exact

MARK = {mark!r}


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    if lam == 0:  # say which process hangs, then hang
        with open(MARK + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(MARK + ".tmp", MARK)
        time.sleep(10**6)
    return exact(rewards, values, next_values, terminated, truncated, gamma, lam)
"""


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a container's init may never reap one)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover - no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def start_hanging_run(tmp_path, *extra):
    """``rlspec check`` on a candidate that hangs in GAE-TD-ERROR-AT-LAMBDA-0 after GAE-SEED-EXAMPLE passed;
    returns (process, worker pid, report path) once the worker is inside the hanging call."""
    mark = tmp_path / "worker.pid"
    candidate = tmp_path / "hangs_when_lambda_is_zero.py"
    candidate.write_text(HANGS_WHEN_LAMBDA_IS_ZERO.format(mark=str(mark)))
    report = tmp_path / "out.json"
    command = [sys.executable, "-m", "rlspec.checks.cli", "check", "--candidate", str(candidate),
               "--only", "GAE-SEED-EXAMPLE,GAE-TD-ERROR-AT-LAMBDA-0", "--json", str(report), "--time-limit", "120", *extra]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not mark.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), process.communicate()
    return process, int(mark.read_text()), report


def wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@pytest.mark.parametrize("signum, code, warning", [
    (signal.SIGINT, 130, "interrupted: 1 of 2 clauses finished"),
    (signal.SIGTERM, 143, "interrupted by SIGTERM: 1 of 2 clauses finished"),
], ids=["ctrl-c", "sigterm"])
def test_a_stopped_run_leaves_a_valid_report_marked_incomplete(tmp_path, signum, code, warning):
    """Ctrl-C and SIGTERM (a CI job's cancel) end the run the same way: the clauses that finished are in a
    valid JSON report marked incomplete, exit 128 + the signal, and the worker is gone."""
    process, worker, report = start_hanging_run(tmp_path)
    try:
        process.send_signal(signum)
        out, _ = process.communicate(timeout=30)
        data = json.loads(report.read_text())
        assert process.returncode == code
        assert data["incomplete"] is True
        assert [c["id"] for c in data["clauses"]] == ["GAE-SEED-EXAMPLE"]
        assert warning in data["warnings"]
        assert wait_gone(worker, 2), "the worker outlived the run"
    finally:
        _kill_group(process, worker)


@pytest.mark.parametrize("workers", [1, 2])
def test_no_worker_outlives_a_killed_run(tmp_path, workers):
    """SIGKILL (what a CI job's timeout sends) gives the parent no chance to clean up: the workers must end
    by themselves, at once, not sleep on with parent 1 for as long as the candidate sleeps."""
    process, worker, _ = start_hanging_run(tmp_path, "-n", str(workers))
    try:
        others = _children(process.pid)
        assert worker in others
        process.kill()
        process.communicate(timeout=30)
        assert [pid for pid in others if not wait_gone(pid, 2)] == []
    finally:
        _kill_group(process, worker)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _kill_group(process, worker: int) -> None:
    """Clean up after a failed assertion: the run's process group, and the worker if it escaped it."""
    for kill in (lambda: os.killpg(process.pid, signal.SIGKILL), lambda: os.kill(worker, signal.SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass
    if process.poll() is None:
        process.wait(5)


def test_same_seed_gives_byte_identical_json_whatever_the_workers(tmp_path):
    """Two runs of the command line with the same seed, one on one worker and one on two: the same JSON byte for byte
    (the verdicts in catalogue order, whichever worker finished first), but for the seconds."""
    outputs = []
    for i, workers in enumerate(("1", "2")):
        path = tmp_path / f"run{i}.json"
        assert main(["check", "--json", str(path), "-n", workers]) == 0
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

"""Isolation: run clauses in worker processes that the suite can kill.

A conformance suite runs code it does not trust. In a worker, a candidate that loops forever in
Python or in native code (a C loop, ``time.sleep``), exhausts memory, segfaults or calls
``os._exit`` costs one clause: the parent kills or loses the worker, records an ``error`` verdict
that says which, starts a fresh worker and goes on.

A hang or a crash costs once, not once per clause. Before it runs a candidate operation the worker
writes which one into a word of memory it shares with the parent (no message, no system call), and
clears it when the operation returns. When a clause times out or the worker dies, the parent reads
that word and blames the operation (the *blame rule*):

- the operation whose code was running at that moment;
- if none was (the time ran out in the suite's own code between calls, or in an autograd backward pass
  through a graph the candidate built), the clause's operation when it exercises only one; otherwise
  nobody: only that clause gets the ``error``.

Every later clause that exercises a blamed operation gets an immediate ``error`` ("gae timed out on
GAE-SEED-EXAMPLE; not retried") instead of waiting out its own limit, so a run with one hanging
operation takes the clean run's time plus one time limit per worker that was inside it.

Workers die with the run: on Linux the kernel kills a worker when the process that started it ends
(``PR_SET_PDEATHSIG``), even by SIGKILL; elsewhere (and as a second line on Linux) a thread in the
worker exits it once its parent is gone. A worker ignores Ctrl-C and SIGTERM are the parent's: the
parent stops (and if need be kills) every worker it started before it returns.

Workers are forked on Linux after the parent has imported the checks (and torch, numpy, Hypothesis
with them), so a worker starts in milliseconds and ``-n`` workers share those pages; elsewhere they
are spawned.

Messages on the pipe: worker -> parent ``("loaded", info)`` or ``("load-error", message)``, then
``("result", ClauseResult)`` per clause; parent -> worker ``("run", clause_id, profile, seed,
dtype)`` or ``("stop",)``.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass, replace
from multiprocessing.connection import wait
from typing import Callable

from ...spec import catalogue
from .lifetime import die_with_parent
from .loader import LoadError, load
from .protocol import Candidate
from .chapters import load_all
from .verdict import DTYPES, PROFILES, ClauseResult, run_clause

POLL = 0.25  # seconds between deadline checks while every worker is busy


@dataclass(frozen=True)
class Limits:
    seconds: float  # per clause
    memory_bytes: int | None  # address-space limit per worker (None: no limit)
    load_seconds: float | None = None  # for importing the candidate (None: as per clause)

    @property
    def load(self) -> float:
        return self.seconds if self.load_seconds is None else self.load_seconds


def default_memory_limit(workers: int) -> int | None:
    """Physical memory shared between the workers and the parent, so one runaway cannot starve the run."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None
    return int(total // (workers + 1))


def address_space() -> int:
    """This process's virtual address space in bytes (what RLIMIT_AS counts; 0 where it cannot be read)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        return 0


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def warm_up() -> None:
    """Import, in the parent, everything a worker needs before it loads the candidate (the checks and
    with them numpy, torch and Hypothesis), so a forked worker inherits it instead of importing it again.
    Only rlspec's own code runs here; the candidate is imported in the worker."""
    if _context().get_start_method() == "fork":
        load_all()


# ------------------------------------------------------------------------------------------------
# in the worker


def _quiet_process(memory_bytes: int | None) -> None:
    """Worker set-up: its stdout/stderr go nowhere, Ctrl-C and SIGTERM are the parent's business, memory is capped."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, inherited through fork
    import faulthandler

    faulthandler.disable()  # a crash is reported by the parent; no dump on the user's terminal
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdout = open(os.devnull, "w")
    sys.stderr = open(os.devnull, "w")
    if "torch" in sys.modules:
        # One intra-op thread per worker: -n workers share the cores, a forked child must not reuse the
        # parent's thread pool, and reductions do not depend on the machine's core count.
        sys.modules["torch"].set_num_threads(1)
    if memory_bytes:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        except (ImportError, ValueError, OSError):  # pragma: no cover - platform without RLIMIT_AS
            pass


def settle() -> None:
    """Move everything imported so far (torch, the checks, the candidate) out of the garbage collector's
    sight: it lives as long as the process. Later collections then scan only what the checks allocate, and
    Hypothesis' first property, which runs a full collection and a scan of every object (``register_random``:
    about 0.2 s with torch loaded), costs milliseconds."""
    import gc

    gc.freeze()  # no collection first: it would cost 0.1 s to reclaim the little garbage importing leaves


def _marked(candidate: Candidate, inside) -> Candidate:
    """``candidate`` with every operation wrapped to record, in the shared word ``inside``, which one is
    running (its 1-based position in the sorted operation names; 0: none). Every path by which a check
    calls candidate code goes through ``candidate.operations``, so every call is covered."""
    names = sorted(candidate.operations)

    def mark(number: int, function):
        @functools.wraps(function)
        def marked(*args, **kwargs):
            outer = inside.value
            inside.value = number
            try:
                return function(*args, **kwargs)
            finally:
                inside.value = outer

        return marked

    return replace(candidate, operations={name: mark(names.index(name) + 1, f) for name, f in candidate.operations.items()})


def _worker_main(conn, candidate, device: str, memory_bytes: int | None, inside, parent: int, overrides=None) -> None:
    die_with_parent(parent)
    _quiet_process(memory_bytes)
    try:
        loaded = load(candidate, device=device, overrides=overrides) if isinstance(candidate, str) else candidate
    except LoadError as exc:
        conn.send(("load-error", str(exc)))
        return
    except BaseException as exc:  # noqa: BLE001
        conn.send(("load-error", f"cannot load candidate {candidate!r}: {type(exc).__name__}: {exc}"))
        return
    conn.send(("loaded", loaded.info()))
    loaded = _marked(loaded, inside)
    registry = load_all()
    settle()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            return
        _, clause_id, profile, seed, dtype = message
        clause = catalogue.by_id(clause_id)
        result = run_clause(loaded, clause, PROFILES[profile], seed, DTYPES[dtype], registry.get(clause_id, []))
        conn.send(("result", result))


# ------------------------------------------------------------------------------------------------
# in the parent


class Worker:
    def __init__(self, candidate, device: str, limits: Limits, overrides: dict | None = None):
        self.limits = limits
        context = _context()
        self.conn, child = context.Pipe()
        self.inside = context.RawValue("i", 0)  # which operation runs now (see _marked)
        self.process = context.Process(
            target=_worker_main, args=(child, candidate, device, limits.memory_bytes, self.inside, os.getpid(), overrides),
            daemon=True)
        self.process.start()
        child.close()
        self.job = None  # (index, clause id, deadline)
        self.operations: list[str] = []  # the candidate's, sorted (from the handshake)

    def handshake(self) -> dict:
        """The candidate's description once the worker has loaded it; LoadError if it cannot."""
        if not self.conn.poll(self.limits.load):
            self.kill()
            raise LoadError(f"cannot load candidate: timed out after {self.limits.load:g} s while importing it")
        try:
            kind, payload = self.conn.recv()
        except (EOFError, OSError):
            self.process.join(1)
            raise LoadError(f"cannot load candidate: the worker died while importing it ({self.death()})") from None
        if kind == "load-error":
            self.stop()
            raise LoadError(payload)
        self.operations = list(payload["operations"])
        return payload

    def start(self, index: int, clause_id: str, profile: str, seed: int, dtype: str) -> None:
        self.job = (index, clause_id, time.monotonic() + self.limits.seconds)
        self.conn.send(("run", clause_id, profile, seed, dtype))

    def running(self) -> str | None:
        """The candidate operation whose code the worker is (or was, when it died) running; None if none."""
        number = self.inside.value
        return self.operations[number - 1] if 0 < number <= len(self.operations) else None

    def death(self) -> str:
        code = self.process.exitcode
        if code is None:
            return "still running"
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            hint = " (out of memory?)" if -code == signal.SIGKILL else ""
            return f"killed by {name}{hint}"
        return f"exit code {code}"

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()

    def stop(self) -> None:
        """End the worker: ask an idle one to stop, kill a busy one (it is running candidate code)."""
        if self.job is not None:
            self.kill()
            return
        try:
            self.conn.send(("stop",))
        except (OSError, ValueError):
            pass
        self.process.join(1)
        if self.process.is_alive():
            self.kill()
        else:
            self.conn.close()


def blame(running: str | None, operations: tuple[str, ...]) -> str | None:
    """The operation a timeout or crash is charged to (the blame rule in the module docstring)."""
    if running is not None:
        return running
    return operations[0] if len(operations) == 1 else None


def run_isolated(
    candidate,
    device: str,
    jobs: list[tuple[str, tuple[str, ...]]],
    *,
    profile: str,
    seed: int,
    dtype: str,
    workers: int,
    limits: Limits,
    on_info: Callable[[dict], None],
    on_result: Callable[[int, object], None],
    overrides: dict | None = None,
) -> None:
    """Run ``jobs`` (clause id, the operations it exercises) on ``workers`` processes; results reach
    ``on_result`` as (index, ClauseResult) in completion order. Raises LoadError if the candidate cannot
    load. Every worker started here has ended when this returns or raises (KeyboardInterrupt included)."""
    started: list[Worker] = []  # every worker, so that none outlives this call

    def new_worker() -> Worker:
        worker = Worker(candidate, device, limits, overrides)
        started.append(worker)
        worker.handshake()
        return worker

    broken: dict[str, str] = {}  # operation -> why its remaining clauses are not run
    pending = list(enumerate(jobs))
    pending.reverse()
    try:
        warm_up()
        first = Worker(candidate, device, limits, overrides)
        started.append(first)
        info = first.handshake()
        on_info(info)
        provided = set(info["operations"])
        pool: list[Worker | None] = [first] + [None] * (min(workers, len(jobs)) - 1)
        while pending or any(w is not None and w.job for w in pool):
            for position, worker in enumerate(pool):
                while (worker is None or worker.job is None) and pending:
                    index, (clause_id, operations) = pending.pop()
                    charged = [op for op in operations if op in broken]
                    if charged and all(op in provided for op in operations):  # else run it: not-provided wins
                        on_result(index, ClauseResult(clause_id, catalogue.by_id(clause_id).operation, "error", message=broken[charged[0]]))
                        continue
                    if worker is None:
                        pool[position] = worker = new_worker()
                    worker.start(index, clause_id, profile, seed, dtype)
            busy = [w for w in pool if w is not None and w.job]
            if not busy:
                continue
            timeout = max(0.0, min(w.job[2] for w in busy) - time.monotonic())
            ready = wait([w.conn for w in busy], timeout=min(timeout, POLL))
            for position, worker in enumerate(pool):
                if worker is None or worker.job is None:
                    continue
                index, clause_id, deadline = worker.job
                operations = jobs[index][1]
                if worker.conn in ready:
                    try:
                        kind, result = worker.conn.recv()
                        worker.job = None
                        on_result(index, result)
                        continue
                    except (EOFError, OSError):
                        worker.process.join(2)
                        running = worker.running()
                        death = worker.death()
                        what = f"crashed the worker process ({death})"
                        culprit = blame(running, operations)
                        message = f"{running} {what}" if running else f"the candidate {what}"
                        if culprit:
                            broken.setdefault(culprit, f"{culprit} crashed the worker process on {clause_id} ({death}); not retried")
                elif time.monotonic() > deadline:
                    running = worker.running()
                    culprit = blame(running, operations)
                    message = f"{running} timed out after {limits.seconds:g} s" if running else f"timed out after {limits.seconds:g} s"
                    if culprit:
                        broken.setdefault(culprit, f"{culprit} timed out on {clause_id} (after {limits.seconds:g} s); not retried")
                else:
                    continue
                worker.job = None
                worker.kill()
                pool[position] = None  # a fresh worker is started when a job needs one
                on_result(index, ClauseResult(clause_id, catalogue.by_id(clause_id).operation, "error", message=message, seconds=limits.seconds))
    finally:
        for worker in started:
            if worker.process.is_alive() or not worker.conn.closed:
                worker.stop()


def stream_in_order(total: int, emit: Callable[[object], None]) -> Callable[[int, object], None]:
    """Adapt completion-order results to catalogue order: buffer until the next index arrives."""
    buffered: dict[int, object] = {}
    state = {"next": 0}

    def receive(index: int, result) -> None:
        buffered[index] = result
        while state["next"] in buffered:
            emit(buffered.pop(state["next"]))
            state["next"] += 1

    return receive

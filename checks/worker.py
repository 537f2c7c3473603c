"""Isolation: run clauses in worker processes that the suite can kill.

A conformance suite runs code it does not trust. In a worker, a candidate that loops forever in
Python or in native code (a C loop, ``time.sleep``), exhausts memory, segfaults or calls
``os._exit`` costs one clause: the parent kills or loses the worker, records an ``error`` verdict
that says which, starts a fresh worker and goes on. Workers are forked from the parent on Linux
(cheap: numpy, Hypothesis and the checks are already imported) and spawned elsewhere.

Messages on the pipe: worker -> parent ``("loaded", info)`` or ``("load-error", message)``, then
``("result", ClauseResult)`` per clause; parent -> worker ``("run", clause_id, profile, seed,
dtype)`` or ``("stop",)``.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Callable

from ..spec import catalogue
from .loader import LoadError, load
from .registry import load_all
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


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def _quiet_process(memory_bytes: int | None) -> None:
    """Worker set-up: its stdout/stderr go nowhere, Ctrl-C is the parent's business, memory is capped."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import faulthandler

    faulthandler.disable()  # a crash is reported by the parent; no dump on the user's terminal
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdout = open(os.devnull, "w")
    sys.stderr = open(os.devnull, "w")
    if "torch" in sys.modules:
        # A forked child must not reuse the parent's intra-op thread pool.
        sys.modules["torch"].set_num_threads(1)
    if memory_bytes:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        except (ImportError, ValueError, OSError):  # pragma: no cover - platform without RLIMIT_AS
            pass


def _worker_main(conn, candidate, device: str, memory_bytes: int | None) -> None:
    _quiet_process(memory_bytes)
    try:
        loaded = load(candidate, device=device) if isinstance(candidate, str) else candidate
    except LoadError as exc:
        conn.send(("load-error", str(exc)))
        return
    except BaseException as exc:  # noqa: BLE001
        conn.send(("load-error", f"cannot load candidate {candidate!r}: {type(exc).__name__}: {exc}"))
        return
    conn.send(("loaded", loaded.info()))
    registry = load_all()
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


class Worker:
    def __init__(self, candidate, device: str, limits: Limits):
        self.limits = limits
        context = _context()
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, candidate, device, limits.memory_bytes), daemon=True)
        self.process.start()
        child.close()
        self.job = None  # (index, clause id, deadline)

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
        return payload

    def start(self, index: int, clause_id: str, profile: str, seed: int, dtype: str) -> None:
        self.job = (index, clause_id, time.monotonic() + self.limits.seconds)
        self.conn.send(("run", clause_id, profile, seed, dtype))

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
        try:
            self.conn.send(("stop",))
        except (OSError, ValueError):
            pass
        self.process.join(1)
        if self.process.is_alive():
            self.kill()
        else:
            self.conn.close()


def run_isolated(
    candidate,
    device: str,
    jobs: list[tuple[str, str | list[str]]],
    *,
    profile: str,
    seed: int,
    dtype: str,
    workers: int,
    limits: Limits,
    on_info: Callable[[dict], None],
    on_result: Callable[[int, object], None],
) -> None:
    """Run ``jobs`` (clause id, operation) on ``workers`` processes; results reach ``on_result``
    as (index, ClauseResult) in completion order. Raises LoadError if the candidate cannot load."""
    first = Worker(candidate, device, limits)
    on_info(first.handshake())
    pool = [first] + [Worker(candidate, device, limits) for _ in range(min(workers, len(jobs)) - 1)]
    for worker in pool[1:]:
        worker.handshake()
    pending = list(enumerate(jobs))
    pending.reverse()
    try:
        while pending or any(w.job for w in pool):
            for worker in pool:
                if worker.job is None and pending:
                    index, (clause_id, _) = pending.pop()
                    worker.start(index, clause_id, profile, seed, dtype)
            busy = [w for w in pool if w.job]
            now = time.monotonic()
            timeout = max(0.0, min(w.job[2] for w in busy) - now) if busy else POLL
            ready = wait([w.conn for w in busy], timeout=min(timeout, POLL) if timeout > 0 else 0)
            for position, worker in enumerate(pool):
                if worker.job is None:
                    continue
                index, clause_id, deadline = worker.job
                operation = jobs[index][1]
                if worker.conn in ready:
                    try:
                        kind, result = worker.conn.recv()
                        worker.job = None
                        on_result(index, result)
                        continue
                    except (EOFError, OSError):
                        worker.process.join(2)
                        message = f"the candidate crashed the worker process ({worker.death()})"
                elif time.monotonic() > deadline:
                    message = f"timed out after {limits.seconds:g} s"
                    worker.kill()
                else:
                    continue
                worker.kill()
                on_result(index, ClauseResult(clause_id, operation, "error", message=message, seconds=limits.seconds))
                pool[position] = replacement = Worker(candidate, device, limits)
                replacement.handshake()
    finally:
        for worker in pool:
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


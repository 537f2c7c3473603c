"""The engine: run every selected clause's checks against a candidate and collect verdicts.

One engine serves the command line, the pytest plugin and :func:`run_conformance`. A clause's
verdict is one of ``pass``, ``fail`` (the candidate's numbers contradict the clause), ``error``
(the candidate raised or returned something unusable), ``xfail`` (a failure the candidate
declared as a deviation), ``skip`` and ``not-provided`` (the candidate lacks an operation).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ...spec import catalogue, contract
from .loader import LoadError, check_xfail_ids, from_object, load, parse_xfail  # noqa: F401 - LoadError re-exported
from .protocol import Candidate
from .chapters import load_all
from .verdict import DTYPES, PROFILES, STATUSES, ClauseResult, Context, Profile, local_constants_warning, run_clause  # noqa: F401 - re-exported

VERSION = "0.1.0"
LOAD_SECONDS = 120.0  # the least time an isolated worker gets to import the candidate
MEMORY_HEADROOM = 512 * 2**20  # address space a worker needs beyond its parent's to load a candidate and run checks


class UsageError(ValueError):
    """Bad arguments to the engine (exit code 2 on the command line)."""


class Terminated(KeyboardInterrupt):
    """A signal other than Ctrl-C (SIGTERM: what a CI job's cancel sends) stopping the run; raised by the
    command line's handler so the run ends as after Ctrl-C, with its report marked incomplete."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class ConformanceResult:
    candidate: str
    profile: str
    seed: int
    dtype: str
    device: str
    results: list[ClauseResult]
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    incomplete: bool = False
    signal: int = 0  # the signal that interrupted the run (SIGINT for Ctrl-C), 0 if none
    conventions: dict[str, Any] = field(default_factory=dict)  # as the candidate declared them (validated)

    @property
    def summary(self) -> dict[str, int]:
        counts = {status: 0 for status in STATUSES}
        for result in self.results:
            counts[result.status] += 1
        return counts

    @property
    def ok(self) -> bool:
        """Every provided operation conforms (declared deviations allowed)."""
        return not self.incomplete and not any(r.status in ("fail", "error") for r in self.results)

    @property
    def failures(self) -> list[ClauseResult]:
        return [r for r in self.results if r.status in ("fail", "error")]

    def __getitem__(self, clause_id: str) -> ClauseResult:
        for result in self.results:
            if result.id == clause_id.upper():
                return result
        raise KeyError(clause_id)

    def to_json(self) -> dict[str, Any]:
        data = {
            "rlspec": VERSION,
            "candidate": self.candidate,
            "profile": self.profile,
            "seed": self.seed,
            "dtype": self.dtype,
            "device": self.device,
            "conventions": self.conventions,
            "clauses": [r.to_json() for r in self.results],
            "summary": self.summary,
        }
        if self.warnings:
            data["warnings"] = self.warnings
        if self.incomplete:
            data["incomplete"] = True
        data["seconds"] = round(self.seconds, 3)
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"


def _matches(clause_id: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(clause_id, p.upper()) or clause_id == p.upper() for p in patterns)


def select(only: str | Iterable[str] | None) -> list[catalogue.Clause]:
    """Clauses matching any comma-separated pattern: an id, a glob (``GAE-*``) or a chapter name.

    A pattern starting with ``!`` excludes what it matches (``!GAE-FLOAT32-*``); with only
    exclusions, everything else is selected.
    """
    every = list(catalogue.clauses())
    if not only:
        return every
    patterns = [p.strip() for p in (only.split(",") if isinstance(only, str) else only) if p.strip()]
    hit = lambda c, p: _matches(c.id, [p]) or p.lower() == c.chapter
    include = [p for p in patterns if not p.startswith("!")]
    exclude = [p[1:] for p in patterns if p.startswith("!")]
    for pattern in include + exclude:  # every entry must match: a misspelt one would silently drop clauses
        if not any(hit(c, pattern) for c in every):
            names = [c.id for c in every] + sorted({c.chapter for c in every})
            if any(ch in pattern for ch in "*?["):  # a glob: suggest the nearest prefix glob (PPO-CLIP-*)
                prefixes = sorted({"-".join(c.id.split("-")[:n]) + "-*" for c in every for n in range(1, len(c.id.split("-")))})
                import difflib

                near = difflib.get_close_matches(pattern.upper(), prefixes, n=1, cutoff=0.8)
                close = f"; did you mean {near[0]!r}?" if near else ""
            else:
                close = contract.nearest(pattern.upper(), [c.id for c in every]) or contract.nearest(pattern.lower(), names)
            raise UsageError(f"--only entry {pattern!r} matches no clause id, glob or chapter{close} (see `rlspec list`)")
    chosen = [c for c in every if (not include or any(hit(c, p) for p in include)) and not any(hit(c, p) for p in exclude)]
    if not chosen:
        raise UsageError(f"--only {','.join(patterns)!r} matches no clause (see `rlspec list`)")
    return chosen


def read_xfail_file(path: str | Path) -> tuple[dict[str, str], list[str]]:
    """Parse ``CLAUSE-ID  # reason`` lines; returns (id -> reason, warnings). An id that names no clause
    is a UsageError (a typo would silently leave the deviation undeclared)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read --xfail file {path}: {exc.strerror or exc}") from None
    entries, warnings = parse_xfail(text, str(path))
    _known_ids(entries, f"--xfail {path}")
    return entries, warnings


def _known_ids(entries, origin: str) -> None:
    try:
        check_xfail_ids(entries, origin)
    except LoadError as exc:
        raise UsageError(str(exc)) from None


def replay_spec(spec: str) -> tuple[str, str]:
    """``(spec as a replay names it, folder to run it from or "")``: a file candidate by its absolute path, so
    the printed command works pasted in any shell from any folder; a dotted module found under the working
    directory (as ``python -m`` finds it) from that directory."""
    target, colon, attribute = spec.partition(":")
    path = Path(target)
    if target.endswith(".py") or path.is_file():
        return str(path.resolve()) + colon + attribute, ""
    top = target.split(".")[0]
    if top.isidentifier() and ((Path.cwd() / top).is_dir() or (Path.cwd() / f"{top}.py").is_file()):
        return spec, str(Path.cwd())
    return spec, ""


def replay_command(spec: str, clause_id: str, profile: str, seed: int, dtype: str, device: str,
                   extra: Iterable[str] = ()) -> str:
    """The command that replays one clause, as a user pastes it into a fresh shell (arguments quoted).
    ``extra``: further options that change the verdict (``--xfail FILE``, ``--config FILE``, limits)."""
    import shlex

    parts = ["rlspec", "check"]
    folder = ""
    if spec != "reference":
        spec, folder = replay_spec(spec)
        parts += ["--candidate", spec]
    parts += ["--only", clause_id, "--profile", profile, "--seed", str(seed)]
    if dtype != "float64":
        parts += ["--dtype", dtype]
    if device != "cpu":
        parts += ["--device", device]
    parts += list(extra)
    command = " ".join(shlex.quote(p) for p in parts)
    return f"cd {shlex.quote(folder)} && {command}" if folder else command


def run_conformance(
    candidate: str | Candidate | Any = "reference",
    *,
    clauses: str | Iterable[str] | None = None,
    profile: str = "quick",
    seed: int = 0,
    dtype: str = "float64",
    device: str = "cpu",
    xfail: dict[str, str] | str | Path | None = None,
    on_start: Callable[["ConformanceResult"], None] | None = None,
    on_result: Callable[[ClauseResult], None] | None = None,
    on_checkpoint: Callable[["ConformanceResult"], None] | None = None,
    isolate: bool = False,
    workers: int = 1,
    time_limit: float | None = None,
    memory_limit: int | None = None,
    require: Iterable[str] = (),
    xfail_strict: bool = False,
    overrides: dict[str, Any] | None = None,
    replay_extra: Iterable[str] = (),
) -> ConformanceResult:
    """Check ``candidate`` against the catalogue; returns every clause's verdict.

    ``candidate``: a spec string (built-in name, dotted module, ``module:object`` or file path), a
    loaded :class:`Candidate`, or any object/module exposing protocol operations. ``xfail``: clause
    id -> reason, or the path of an xfail file (an id that names no clause is a UsageError).
    ``on_start(run)`` is called once the candidate has loaded (its declared conventions are in
    ``run.conventions``), ``on_result`` after each clause. ``isolate``: run clauses in worker processes
    (``workers`` of them) that are killed after ``time_limit`` seconds per clause (default: the
    profile's) and capped at ``memory_limit`` bytes; the command line isolates by default. Use in a
    library's tests as ``assert run_conformance("mypkg.rlspec_adapter").ok``.

    No false green: a candidate that provides no operation, or lacks one named in ``require`` (or its own
    ``RLSPEC_REQUIRE``), raises LoadError. An xfail entry whose clause passes is an XPASS (``ClauseResult.xpass``);
    with ``xfail_strict`` it fails the clause. ``overrides``: declarations from outside the candidate
    (``[tool.rlspec]``; see :func:`loader.load`).
    """
    if profile not in PROFILES:
        raise UsageError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if dtype not in DTYPES:
        raise UsageError(f"unknown dtype {dtype!r}; choose float64 or float32")
    if workers < 1:
        raise UsageError("workers must be at least 1")
    started = time.perf_counter()
    selected = select(clauses)
    chosen_profile = PROFILES[profile]
    overrides = dict(overrides or {})
    try:
        required = contract.validate_operation_names(list(require or ()), "--require")
    except contract.ContractError as exc:
        raise UsageError(str(exc)) from None
    if required:
        overrides["RLSPEC_REQUIRE"] = [*overrides.get("RLSPEC_REQUIRE", ()), *required]
    if not isinstance(candidate, (str, Candidate)):
        candidate = from_object(candidate, device=device, overrides=overrides)
    elif isinstance(candidate, Candidate) and required:
        absent = [op for op in required if not candidate.provides(op)]
        if absent:
            raise LoadError(f"candidate {candidate.spec!r} does not provide {', '.join(absent)}, which it is required "
                            f"to provide (RLSPEC_REQUIRE / --require)")
    spec = candidate if isinstance(candidate, str) else candidate.spec
    warnings: list[str] = []
    declared: dict[str, str] = {}
    if isinstance(xfail, (str, Path)):
        declared, warnings = read_xfail_file(xfail)
    elif xfail:
        declared = {k.upper(): v for k, v in xfail.items()}
        _known_ids(declared, "xfail")
    unswitched = local_constants_warning()
    if unswitched:
        warnings.append(unswitched)

    results: list[ClauseResult] = []
    run = ConformanceResult(spec, profile, seed, dtype, device, results, warnings)

    def adopt(info: dict[str, Any]) -> None:
        """The loaded candidate's declarations: its own RLSPEC_XFAIL (overridden by the caller's file or
        dict) and its conventions (validated at load) for the report."""
        merged = {**info["xfail"], **declared}
        declared.clear()
        declared.update(merged)
        run.conventions = contract.plain(info["conventions"])
        if on_start:
            on_start(run)

    def emit(result: ClauseResult) -> None:
        _apply_xfail(result, declared.get(result.id), xfail_strict)
        if result.status in ("fail", "error"):
            result.replay = replay_command(spec, result.id, profile, seed, dtype, device, replay_extra)
        results.append(result)
        if on_result:
            on_result(result)
        if on_checkpoint:
            run.seconds = time.perf_counter() - started
            on_checkpoint(run)

    try:
        if isolate:
            from . import worker

            if memory_limit is not None:
                worker.warm_up()  # what a worker inherits: its address space starts as a copy of this one
                floor = worker.address_space() + MEMORY_HEADROOM
                if memory_limit < floor:
                    raise UsageError(f"--memory-limit {memory_limit // 2**20} MB is below what a worker needs before "
                                     f"the candidate runs (a worker starts as a copy of this process, "
                                     f"{worker.address_space() // 2**20} MB of address space with torch loaded); "
                                     f"give at least {-(-floor // 2**20)}")
            limits = worker.Limits(
                seconds=float(time_limit or chosen_profile.time_limit),
                # importing a library (TRL, OpenRLHF: transformers) takes tens of seconds on a loaded CI machine:
                # at least LOAD_SECONDS unless a limit is given explicitly
                load_seconds=float(time_limit or max(chosen_profile.time_limit, LOAD_SECONDS)),
                memory_bytes=memory_limit if memory_limit is not None else (
                    worker.default_memory_limit(workers) if device == "cpu" else None),
            )
            jobs = [(c.id, c.operations) for c in selected]
            worker.run_isolated(
                candidate, device, jobs, profile=profile, seed=seed, dtype=dtype, workers=workers, limits=limits,
                on_info=adopt, on_result=worker.stream_in_order(len(jobs), emit), overrides=overrides,
            )
        else:
            loaded = load(candidate, device=device, overrides=overrides) if isinstance(candidate, str) else candidate
            adopt(loaded.info())
            registry = load_all()
            with one_intra_op_thread():
                for clause in selected:
                    emit(run_clause(loaded, clause, chosen_profile, seed, DTYPES[dtype], registry.get(clause.id, [])))
    except KeyboardInterrupt as stop:
        run.incomplete = True
        run.signal = getattr(stop, "signum", signal.SIGINT)
        by = "" if run.signal == signal.SIGINT else f" by {signal.Signals(run.signal).name}"
        run.warnings.append(f"interrupted{by}: {len(results)} of {len(selected)} clauses finished")
    run.seconds = time.perf_counter() - started
    return run


@contextlib.contextmanager
def one_intra_op_thread():
    """torch on one intra-op thread while the checks run (restored after), as in every isolated worker. The
    checks' tensors are small: waking a second thread costs more than it saves (a (8, 4) softmax takes 2 us on
    one thread and milliseconds on two of a loaded machine), and a run should not depend on the core count."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _apply_xfail(result: ClauseResult, reason: str | None, strict: bool = False) -> None:
    """A declared deviation: a failure shows as ``xfail``; a pass is an XPASS (pytest's unexpected pass), which
    ``strict`` (``--xfail-strict``, pytest's xfail_strict) turns into a failure: a fixed deviation whose entry
    stays would hide the day it breaks again."""
    if reason is None:
        return
    if result.status in ("fail", "error"):
        result.notes.append(f"declared deviation: {reason}")
        result.status = "xfail"
    elif result.status == "pass":
        result.xpass = True
        if strict:
            result.status = "fail"
            result.message = (f"XPASS(strict): declared as a deviation ({reason}) but conforms; remove the xfail "
                              f"entry")
        else:
            result.notes.append(f"XPASS: declared as a deviation ({reason}) but conforms: the xfail entry can go")

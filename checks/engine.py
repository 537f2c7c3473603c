"""The engine: run every selected clause's checks against a candidate and collect verdicts.

One engine serves the command line, the pytest plugin and :func:`run_conformance`. A clause's
verdict is one of ``pass``, ``fail`` (the candidate's numbers contradict the clause), ``error``
(the candidate raised or returned something unusable), ``xfail`` (a failure the candidate
declared as a deviation), ``skip`` and ``not-provided`` (the candidate lacks an operation).
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from rlspec.checks import protocol
from rlspec.checks.assertions import ClauseFailure
from rlspec.checks.loader import from_object, load, parse_xfail
from rlspec.checks.protocol import Candidate, CandidateError, NotProvided
from rlspec.checks.registry import load_all
from rlspec.spec import catalogue

VERSION = "0.1.0"
STATUSES = ("pass", "fail", "error", "xfail", "skip", "not-provided")


@dataclass(frozen=True)
class Profile:
    name: str
    max_examples: int
    time_limit: float  # seconds per clause before an isolated run kills the candidate
    description: str


PROFILES = {
    "quick": Profile("quick", 12, 30.0, "pre-commit: known-answer vectors plus a few drawn examples per property"),
    "ci": Profile("ci", 100, 120.0, "a CI gate: 100 drawn examples per property, seeded, no deadline, no database"),
    "thorough": Profile("thorough", 1000, 600.0, "nightly: 1000 drawn examples per property"),
}
LOAD_SECONDS = 120.0  # the least time an isolated worker gets to import the candidate
DTYPES = {"float64": np.float64, "float32": np.float32}


class UsageError(ValueError):
    """Bad arguments to the engine (exit code 2 on the command line)."""


@dataclass
class ClauseResult:
    id: str
    operation: str | list[str]
    status: str
    message: str = ""
    counterexample: str = ""
    cause: str = ""
    call: str = ""
    replay: str = ""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = {
            "id": self.id,
            "operation": self.operation,
            "status": self.status,
            "message": self.message,
            "counterexample": self.counterexample,
        }
        for key in ("cause", "call", "replay"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        if self.notes:
            data["notes"] = self.notes
        data["seconds"] = round(self.seconds, 4)
        return data


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


class Context:
    """What a check receives: the candidate, the precision, the profile's example budget and seeds."""

    def __init__(self, candidate: Candidate, clause: catalogue.Clause, profile: Profile, seed: int, dtype):
        self.candidate = candidate
        self.clause = clause
        self.profile = profile
        self.seed = seed
        self.dtype = np.dtype(dtype)
        self.notes: list[str] = []
        self._repeated: set[str] = set()

    @property
    def u(self) -> float:
        """Unit roundoff of the inputs the suite passes (the candidate's outputs may lower it)."""
        return protocol.unit_roundoff(self.dtype)

    def call(self, operation: str, args: dict[str, Any], *, dtype=None, **options) -> protocol.Call:
        """Call the candidate (see :func:`protocol.call`) with the run's dtype unless one is given.

        The first call of each operation in a clause is made twice to detect nondeterminism
        (skipped for inputs over 20000 elements, where a repeat would cost too much).
        """
        dtype = np.dtype(dtype or self.dtype)
        if "repeat" not in options:
            size = sum(v.size for v in args.values() if isinstance(v, np.ndarray))
            options["repeat"] = operation not in self._repeated and size <= 20_000
            self._repeated.add(operation)
        result = protocol.call(self.candidate, operation, args, dtype=dtype, **options)
        for note in result.notes:
            if note not in self.notes:
                self.notes.append(note)
        if result.unit_roundoff > protocol.unit_roundoff(dtype):
            note = f"judged at the precision of its output ({', '.join(sorted(set(result.output_dtypes)))})"
            if note not in self.notes:
                self.notes.append(note)
        return result

    def seed_for(self, label: str) -> int:
        digest = hashlib.sha256(f"{self.seed}:{self.clause.id}:{label}".encode()).digest()
        return int.from_bytes(digest[:4], "little")

    def rng(self, label: str) -> np.random.Generator:
        return np.random.default_rng(self.seed_for(label))

    def property(self, strategy, body: Callable[[Any], None], *, label: str, max_examples: int | None = None) -> None:
        """Run ``body`` on examples drawn from ``strategy``; a failure is shrunk to a minimal example."""
        from hypothesis import HealthCheck, Phase, Verbosity, given, settings
        from hypothesis import seed as hypothesis_seed

        budget = max_examples if max_examples is not None else self.profile.max_examples

        @hypothesis_seed(self.seed_for(label))
        @settings(
            max_examples=budget,
            deadline=None,
            database=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
            report_multiple_bugs=False,
            phases=(Phase.explicit, Phase.generate, Phase.shrink),
            print_blob=False,
        )
        @given(strategy)
        def run(example):
            body(example)

        with _no_local_constants():
            run()


@contextlib.contextmanager
def _no_local_constants():
    """Hypothesis (6.131+) mixes literals from every *local* module in sys.modules into what it draws: with
    rlspec installed editable, or a candidate file of the user's, the examples a seed gives would depend on
    the install, on the candidate's source and on what was imported before. A conformance verdict must
    depend on the seed alone, so the property runs see no local constants (Hypothesis' own constant pool,
    fixed per version, stays)."""
    try:
        from hypothesis.internal.conjecture import providers
        empty = providers.Constants()
        original = providers._get_local_constants
    except (ImportError, AttributeError):  # another Hypothesis: nothing to switch off
        yield
        return
    providers._get_local_constants = lambda: empty
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE.cache.clear()


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
    chosen = [c for c in every if (not include or any(hit(c, p) for p in include)) and not any(hit(c, p) for p in exclude)]
    if not chosen:
        raise UsageError(f"--only {','.join(patterns)!r} matches no clause (see `rlspec list`)")
    return chosen


def read_xfail_file(path: str | Path) -> tuple[dict[str, str], list[str]]:
    """Parse ``CLAUSE-ID  # reason`` lines; returns (id -> reason, warnings)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read --xfail file {path}: {exc.strerror or exc}") from None
    return parse_xfail(text, str(path))


def replay_command(spec: str, clause_id: str, profile: str, seed: int, dtype: str, device: str) -> str:
    parts = ["rlspec check"]
    if spec != "reference":
        parts.append(f"--candidate {spec}")
    parts += [f"--only {clause_id}", f"--profile {profile}", f"--seed {seed}"]
    if dtype != "float64":
        parts.append(f"--dtype {dtype}")
    if device != "cpu":
        parts.append(f"--device {device}")
    return " ".join(parts)


def run_clause(candidate: Candidate, clause: catalogue.Clause, profile: Profile, seed: int, dtype, checks) -> ClauseResult:
    """One clause's verdict. Never raises (except KeyboardInterrupt)."""
    result = ClauseResult(clause.id, clause.operation, "pass")
    missing = [op for op in clause.operations if not candidate.provides(op)]
    if missing:
        result.status = "not-provided"
        result.message = f"the candidate does not provide {', '.join(missing)}"
        return result
    if not checks:
        result.status, result.message = "skip", "no check is registered for this clause"
        return result
    start = time.perf_counter()
    context = Context(candidate, clause, profile, seed, dtype)
    try:
        for check in checks:
            check.function(context)
    except ClauseFailure as failure:
        result.status, result.message = "fail", failure.message
        result.counterexample, result.call = failure.table, failure.call
        result.cause = failure.cause or clause.likely_cause
    except CandidateError as error:
        result.status, result.message = "error", str(error)
    except NotProvided as lack:
        result.status, result.message = "not-provided", str(lack)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the suite itself never crashes
        result.status, result.message = _unexpected(exc)
    result.seconds = time.perf_counter() - start
    result.notes = context.notes
    return result


def _unexpected(exc: BaseException) -> tuple[str, str]:
    try:
        from hypothesis.errors import Flaky
    except ImportError:  # pragma: no cover
        Flaky = ()
    if isinstance(exc, Flaky):
        return "error", "nondeterministic: the same input gave different verdicts on replay"
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions[0]
        if isinstance(inner, ClauseFailure):
            return "fail", inner.message
        if isinstance(inner, CandidateError):
            return "error", str(inner)
        if isinstance(inner, NotProvided):
            return "not-provided", str(inner)
        return _unexpected(inner)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return "error", f"internal error in rlspec ({type(exc).__name__}{': ' + text if text else ''}); please report it"


def run_conformance(
    candidate: str | Candidate | Any = "reference",
    *,
    clauses: str | Iterable[str] | None = None,
    profile: str = "quick",
    seed: int = 0,
    dtype: str = "float64",
    device: str = "cpu",
    xfail: dict[str, str] | str | Path | None = None,
    on_result: Callable[[ClauseResult], None] | None = None,
    on_checkpoint: Callable[["ConformanceResult"], None] | None = None,
    isolate: bool = False,
    workers: int = 1,
    time_limit: float | None = None,
    memory_limit: int | None = None,
) -> ConformanceResult:
    """Check ``candidate`` against the catalogue; returns every clause's verdict.

    ``candidate``: a spec string (built-in name, dotted module, ``module:object`` or file path), a
    loaded :class:`Candidate`, or any object/module exposing protocol operations. ``xfail``: clause
    id -> reason, or the path of an xfail file. ``isolate``: run clauses in worker processes
    (``workers`` of them) that are killed after ``time_limit`` seconds per clause (default: the
    profile's) and capped at ``memory_limit`` bytes; the command line isolates by default. Use in a
    library's tests as ``assert run_conformance("mypkg.rlspec_adapter").ok``.
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
    if not isinstance(candidate, (str, Candidate)):
        candidate = from_object(candidate, device=device)
    spec = candidate if isinstance(candidate, str) else candidate.spec
    warnings: list[str] = []
    declared: dict[str, str] = {}
    if isinstance(xfail, (str, Path)):
        declared, warnings = read_xfail_file(xfail)
    elif xfail:
        declared = {k.upper(): v for k, v in xfail.items()}

    results: list[ClauseResult] = []
    run = ConformanceResult(spec, profile, seed, dtype, device, results, warnings)

    def adopt(info_xfail: dict[str, str]) -> None:
        """The candidate's own RLSPEC_XFAIL, overridden by the caller's file or dict."""
        merged = {**info_xfail, **declared}
        declared.clear()
        declared.update(merged)
        known = {c.id for c in catalogue.clauses()}
        for clause_id in sorted(set(declared) - known):
            warnings.append(f"xfail entry {clause_id} matches no clause")

    def emit(result: ClauseResult) -> None:
        _apply_xfail(result, declared.get(result.id))
        if result.status in ("fail", "error"):
            result.replay = replay_command(spec, result.id, profile, seed, dtype, device)
        results.append(result)
        if on_result:
            on_result(result)
        if on_checkpoint:
            run.seconds = time.perf_counter() - started
            on_checkpoint(run)

    try:
        if isolate:
            from rlspec.checks import worker

            limits = worker.Limits(
                seconds=float(time_limit or chosen_profile.time_limit),
                # importing a library (TRL, OpenRLHF: transformers) takes tens of seconds on a loaded CI machine:
                # at least LOAD_SECONDS unless a limit is given explicitly
                load_seconds=float(time_limit or max(chosen_profile.time_limit, LOAD_SECONDS)),
                memory_bytes=memory_limit if memory_limit is not None else (
                    worker.default_memory_limit(workers) if device == "cpu" else None),
            )
            jobs = [(c.id, c.operation) for c in selected]
            worker.run_isolated(
                candidate, device, jobs, profile=profile, seed=seed, dtype=dtype, workers=workers, limits=limits,
                on_info=lambda info: adopt(info["xfail"]), on_result=worker.stream_in_order(len(jobs), emit),
            )
        else:
            loaded = load(candidate, device=device) if isinstance(candidate, str) else candidate
            adopt(loaded.xfail)
            registry = load_all()
            for clause in selected:
                emit(run_clause(loaded, clause, chosen_profile, seed, DTYPES[dtype], registry.get(clause.id, [])))
    except KeyboardInterrupt:
        run.incomplete = True
        run.warnings.append(f"interrupted: {len(results)} of {len(selected)} clauses finished")
    run.seconds = time.perf_counter() - started
    return run


def _apply_xfail(result: ClauseResult, reason: str | None) -> None:
    if reason is None:
        return
    if result.status in ("fail", "error"):
        result.notes.append(f"declared deviation: {reason}")
        result.status = "xfail"
    elif result.status == "pass":
        result.notes.append(f"declared as a deviation ({reason}) but conforms: the xfail entry can go")

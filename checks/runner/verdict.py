"""One clause's verdict: the profiles, the context a check receives, and :func:`run_clause`.

The engine (the whole run) and the worker (one isolated process) both call :func:`run_clause`;
neither imports the other for it.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from . import protocol
from ...spec import catalogue, contract
from ..kit.assertions import ClauseFailure
from .protocol import Candidate, CandidateError, NotProvided

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
DTYPES = {"float64": np.float64, "float32": np.float32}


@dataclass(frozen=True)
class Tier:
    """How many examples a property draws: ``share`` of the profile's count, at least ``minimum``; ``quick``,
    when given, is the count at the quick profile instead."""

    share: Fraction
    minimum: int
    reason: str
    quick: int | None = None

    def examples(self, profile: Profile) -> int:
        if self.quick is not None and profile.name == "quick":
            return self.quick
        return max(self.minimum, math.floor(profile.max_examples * self.share))


# The one rule for drawn-example budgets: a property names its tier (Context.property's ``tier``), the
# profile sets the count. The known answers every check runs first, on every seed, are what catch the
# named mutants at quick; drawn examples add breadth, and a tier is cheaper where one example costs more.
EXAMPLE_TIERS = {
    "call": Tier(Fraction(1), 0, "one or two candidate calls per example: the profile's count"),
    "grouped": Tier(Fraction(1, 2), 4, "a few calls per example, each of a group of samples (GRPO)"),
    "autograd": Tier(Fraction(1, 3), 4, "each example is a torch call the suite differentiates, with its "
                     "subgradient bounds (PPO and RLHF losses, the offline chapter's CQL, IQL and AWR losses), or "
                     "an exact expectation over joint outcomes (GROUP-BASELINE-BIAS)"),
    "quadrature": Tier(Fraction(1, 4), 3, "each example is a Gauss-Legendre quadrature of the sampled CQL "
                       "estimator, several candidate calls (CQL-SAMPLED-IMPORTANCE-WEIGHTS, -TEMPERATURE)"),
    "autograd-weights": Tier(Fraction(2, 3), 8, "RLHF-AGG-GRADIENT-WEIGHTS: one call per example, every mode "
                             "and optional argument drawn, so twice the autograd share"),
    "enumeration": Tier(Fraction(1, 6), 1, "each example is a whole enumeration (the gridworld's paths), a "
                        "complete ppo_update, or a call per declared mode (RLHF width, masked)"),
    "kl-stop": Tier(Fraction(1, 12), 1, "each example is two complete ppo_updates of 6 epochs (PPO-UPDATE-KL-EARLY-STOP)"),
    "known-answers-first": Tier(Fraction(1), 0, "TRPO, Gaussian, off-policy, normalisation: the known answers catch "
                                "the chapters' mutants; at quick, 3 drawn examples keep each chapter near a second", quick=3),
    "known-answers-first-costly": Tier(Fraction(1, 3), 4, "trpo_update: the reference runs a CG of "
                                       "double-backward products and the oracle takes Jacobians", quick=2),
    "training": Tier(Fraction(1, 33), 0, "GRID-TRAIN-PPO-IMPROVES's seeds beyond the fixed one: each is a "
                     "training run"),
}


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
    conventions: dict[str, Any] = field(default_factory=dict)  # the conventions the checks read, in force
    xpass: bool = False  # declared as a deviation (xfail) but conforms
    evidence: list[str] = field(default_factory=list)  # what is known about a failure's cause beyond `cause`
    features: list[str] = field(default_factory=list)  # features of the failing input (for the run's summary)
    # Whether the verdict may depend on the seed: False only when nothing seed-dependent was consumed before it
    # (no seed, no drawn example, no RNG moved; Context.seed_dependent), so every seed replays the very same
    # computation up to the verdict. Not in the JSON report (a property of how the verdict was reached).
    seed_dependent: bool = True

    def to_json(self) -> dict[str, Any]:
        data = {
            "id": self.id,
            "operation": self.operation,
            "status": self.status,
            "message": self.message,
            "counterexample": self.counterexample,
        }
        for key in ("cause", "evidence", "features", "call", "replay", "xpass"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        if self.notes:
            data["notes"] = self.notes
        if self.conventions:
            data["conventions"] = contract.plain(self.conventions)
        data["seconds"] = round(self.seconds, 4)
        return data


class Context:
    """What a check receives: the candidate, the precision, the profile's example budget and seeds."""

    def __init__(self, candidate: Candidate, clause: catalogue.Clause, profile: Profile, seed: int, dtype):
        self.candidate = candidate
        self.clause = clause
        self.profile = profile
        self._seed = seed
        self.seed_read = False  # whether a check has read the seed (directly, or through seed_for, rng, property)
        self.dtype = np.dtype(dtype)
        self.notes: list[str] = []
        self.conventions: dict[str, Any] = {}  # the conventions this clause's checks read, with their values in force
        self._repeated: set[str] = set()
        self.drawing = False  # inside a property's drawn examples (rlspec vectors records only the fixed inputs)
        self.calls: list[protocol.Call] = []  # the latest candidate calls: the evidence a failure's cause rests on
        self.examples_seen: list[tuple[bool, frozenset[str]]] = []  # drawn examples: (failed, features of its input)

    def convention(self, key: str):
        """The value of convention ``key`` in force: the candidate's declaration (validated at load) or the
        contract's default. The one way checks read conventions (spec/contract/*.toml defines them)."""
        value = self.candidate.conventions.get(key, contract.convention(key).default)
        self.conventions[key] = value
        return value

    def default(self, key: str):
        """The contract's default for ``key`` (e.g. to say in a message that a declared value differs)."""
        return contract.convention(key).default

    def provided(self, key: str, *needed: str) -> tuple[str, ...]:
        """A subset convention (kinds or modes the candidate provides): those of ``needed`` (default: every
        allowed value) that it declares, in the contract's order. None of them: :class:`NotProvided`, as for
        a missing operation. A candidate that declares fewer than all is judged on those, and the verdict
        says so in a note."""
        spec = contract.convention(key)
        declared = self.convention(key)
        wanted = needed or spec.allowed
        kinds = tuple(k for k in wanted if k in declared)
        if not kinds:
            raise NotProvided(f"the candidate declares {key} {', '.join(declared)}: no {' or '.join(wanted)}")
        if declared != spec.allowed:
            self.note(f"judged on the declared {spec.noun} {', '.join(declared)} only ({key})")
        return kinds

    def note(self, text: str) -> None:
        """Add a note to the verdict (once)."""
        if text not in self.notes:
            self.notes.append(text)

    @property
    def u(self) -> float:
        """Unit roundoff of the inputs the suite passes (the candidate's outputs may lower it)."""
        return protocol.unit_roundoff(self.dtype)

    def call(self, operation: str, args: dict[str, Any], *, dtype=None, record: bool = True, **options) -> protocol.Call:
        """Call the candidate (see :func:`protocol.call`) with the run's dtype unless one is given.

        The first call of each operation in a clause is made twice to detect nondeterminism
        (skipped for inputs over 20000 elements, where a repeat would cost too much).
        ``record=False``: one plain call, neither repeated nor kept as the evidence of a failure, its
        notes left to the check (a rule replayed step by step, whose own outputs are the evidence).
        """
        dtype = np.dtype(dtype or self.dtype)
        if not record:
            return protocol.call(self.candidate, operation, args, dtype=dtype, **options)
        if "repeat" not in options:
            size = sum(v.size for v in args.values() if isinstance(v, np.ndarray))
            options["repeat"] = operation not in self._repeated and size <= 20_000
            self._repeated.add(operation)
        result = protocol.call(self.candidate, operation, args, dtype=dtype, **options)
        self.calls = self.calls[-(KEPT_CALLS - 1):] + [result]
        for note in result.notes:
            if note not in self.notes:
                self.notes.append(note)
        if result.widened_by == "declared":
            self.note(f"judged at {result.precision} as declared (RLSPEC_PRECISION)")
        elif result.widened_by == "output":
            self.note(f"judged at the precision of its output ({result.precision})")
        return result

    def invoke(self, operation: str, args: dict[str, Any]) -> tuple[Any, list[str]]:
        """The candidate's ``operation`` called on ``args`` as they are (no conversion, no validation: an
        operation such as ``train_ppo`` takes an environment), its output captured and the global state it
        changed restored. Returns ``(result, changes)``; raises :class:`CandidateError` if it raised or broke
        torch's global state."""
        function = self.candidate.operations[operation]
        result, _, changes = protocol._invoke(lambda **kw: function(**kw), args, operation)
        return result, changes

    def _seen(self, failed: bool, first: int) -> None:
        """Record a drawn example's outcome with the features of its first candidate call's input."""
        made = self.calls[first:] if first < len(self.calls) else self.calls[-1:]
        if made and len(self.examples_seen) < 2000:
            self.examples_seen.append((failed, frozenset(features(made[0].args))))

    @property
    def seed(self) -> int:
        """The run's seed. Reading it marks the verdict seed-dependent (see :meth:`seed_dependent`)."""
        self.seed_read = True
        return self._seed

    def seed_for(self, label: str) -> int:
        digest = hashlib.sha256(f"{self.seed}:{self.clause.id}:{label}".encode()).digest()
        return int.from_bytes(digest[:4], "little")

    def rng(self, label: str) -> np.random.Generator:
        return np.random.default_rng(self.seed_for(label))

    def examples(self, tier: str = "call") -> int:
        """The number of examples a property of ``tier`` draws at this profile (see EXAMPLE_TIERS)."""
        try:
            return EXAMPLE_TIERS[tier].examples(self.profile)
        except KeyError:
            raise KeyError(f"no example tier {tier!r} (known: {', '.join(EXAMPLE_TIERS)})") from None

    def property(self, strategy, body: Callable[[Any], None], *, label: str, tier: str = "call") -> None:
        """Run ``body`` on examples drawn from ``strategy`` (as many as ``tier`` gets at this profile); a
        failure is shrunk to a minimal example."""
        from hypothesis import HealthCheck, Phase, Verbosity, given, settings
        from hypothesis import seed as hypothesis_seed

        budget = self.examples(tier)

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
            first = len(self.calls)
            self.calls = self.calls[-(KEPT_CALLS - 1):] if first >= KEPT_CALLS else self.calls
            first = len(self.calls)
            try:
                body(example)
            except ClauseFailure:
                self._seen(True, first)
                raise
            self._seen(False, first)

        # No example database (database=None), so no key: without one set, Hypothesis hashes the test's source
        # for it on every run (inspect.getsource and tokenize, about 3% of a quick run).
        run._hypothesis_internal_database_key = None
        drawing, self.drawing = self.drawing, True
        try:
            with _no_local_constants():
                run()
        finally:
            self.drawing = drawing


    def seed_dependent(self, before: tuple) -> bool:
        """Whether what the checks computed so far may depend on the seed, given :func:`random_state` as it was
        when they started. False only when it provably does not: no check read the seed (``seed``, ``seed_for``,
        ``rng``, ``property``), no global RNG moved (numpy's, torch's, Python's, Hypothesis' own: a check drawing
        from one without the context, or a bare ``@given``, moves it), and no candidate call moved one (restored
        after each call, but what it drew may have shaped its output). Unsure counts as dependent."""
        if self.seed_read or protocol.rng_draws != before[0]:
            return True
        numpy_before = before[1][1]
        if protocol._numpy_rng_unchanged(numpy_before):  # 1 us where get_state() copies the key (0.1 ms)
            then, now = before[1][:1] + before[1][2:], random_state(numpy=False)[1]
        else:
            then, now = before[1], random_state()[1]
        return len(then) != len(now) or not all(protocol._same(a, b) for a, b in zip(then, now))


def random_state(numpy: bool = True) -> tuple[int, tuple]:
    """``(candidate calls that moved an RNG so far, the global RNGs' states)``, for :meth:`Context.seed_dependent`
    (``numpy=False``: without numpy's, which the caller compared on its own). A generator whose state cannot be
    read is a fresh object each time, so it never compares equal: dependent."""
    import random
    import sys

    states: list[Any] = [random.getstate()] + ([np.random.get_state()] if numpy else [])
    torch = sys.modules.get("torch")
    if torch is not None:
        states.append(torch.get_rng_state())
        if torch.cuda.is_initialized():
            states.append(tuple(torch.cuda.get_rng_state_all()))
    core = sys.modules.get("hypothesis.core")
    if core is not None:  # what a bare @given without a seed draws its seed from
        try:
            own = core.threadlocal._hypothesis_global_random
            states.append(None if own is None else own.getstate())
        except AttributeError:
            states.append(object())
    return protocol.rng_draws, tuple(states)


def import_hypothesis_without_plugins() -> None:
    """Import Hypothesis with its entry-point plugins off (``HYPOTHESIS_NO_PLUGINS``), then put the environment
    back, so that workers and candidates see the user's. A plugin can register strategies and backends, which would
    make what a seed draws depend on the install (the reason for the local-constants switch below); and the plugins
    an environment happens to hold cost time: trio's (selenium brings trio) imports pytest, about 0.15 s of every
    run. rlspec's properties use none. The command line and the matrix's per-adapter runs call this first; nothing
    is done where Hypothesis is already imported (rlspec inside a pytest run)."""
    import os
    import sys

    if "hypothesis" in sys.modules:
        return
    previous = os.environ.get("HYPOTHESIS_NO_PLUGINS")
    os.environ["HYPOTHESIS_NO_PLUGINS"] = "1"
    try:
        import hypothesis  # noqa: F401
    except ImportError:  # reported where a check needs it
        pass
    finally:
        if previous is None:
            del os.environ["HYPOTHESIS_NO_PLUGINS"]
        else:
            os.environ["HYPOTHESIS_NO_PLUGINS"] = previous


LOCAL_CONSTANTS = "hypothesis.internal.conjecture.providers._get_local_constants"  # the patch point


def _local_constants_switch():
    """``(providers, empty)`` where the local-constants provider can be switched off; None where it cannot."""
    try:
        from hypothesis.internal.conjecture import providers

        providers._get_local_constants, providers.CONSTANTS_CACHE.cache.clear  # noqa: B018 - both must exist
        return providers, providers.Constants()
    except (ImportError, AttributeError):
        return None


def local_constants_warning() -> str | None:
    """A warning for the report when drawn examples may depend on how rlspec is installed: this Hypothesis
    mixes local constants into its draws (6.131 and later do) but the patch point that switches them off is
    gone. None when all is well (the switch works, or this Hypothesis has no local constants)."""
    if _local_constants_switch() is not None:
        return None
    try:
        import hypothesis.internal.constants_ast  # noqa: F401 - present where local constants exist
    except ImportError:
        return None
    import hypothesis

    return (f"Hypothesis {hypothesis.__version__} mixes constants from local modules into drawn examples and rlspec "
            f"cannot switch that off ({LOCAL_CONSTANTS} is gone): a seed may draw different examples under an "
            f"editable install, a wheel, or another candidate file; pin a Hypothesis release that has it, or report it")


@contextlib.contextmanager
def _no_local_constants():
    """Hypothesis (6.131+) mixes literals from every *local* module in sys.modules into what it draws: with
    rlspec installed editable, or a candidate file of the user's, the examples a seed gives would depend on
    the install, on the candidate's source and on what was imported before. A conformance verdict must
    depend on the seed alone, so the property runs see no local constants (Hypothesis' own constant pool,
    fixed per version, stays). Where the patch point is gone the run says so (:func:`local_constants_warning`)
    and tests/test_reproducibility.py's cross-install test fails."""
    switch = _local_constants_switch()
    if switch is None:
        yield
        return
    providers, empty = switch
    original, outside = providers._get_local_constants, providers.CONSTANTS_CACHE
    providers._get_local_constants = lambda: empty
    # Hypothesis caches, per kind of draw, which constants its bounds permit (local ones among them). Under
    # the switch those are computed without local constants, so they go to a cache of rlspec's own that
    # outlives the property: the same values every time, filtered once per run instead of once per property
    # (one filter is a few hundred `choice_permitted` calls), and the outside cache is left as it was.
    global _NO_LOCAL_CONSTANTS_CACHE
    if _NO_LOCAL_CONSTANTS_CACHE is None:
        try:
            _NO_LOCAL_CONSTANTS_CACHE = type(outside)(1024)
        except TypeError:  # another Hypothesis' cache class: clear the shared one on the way in and out, as before
            _NO_LOCAL_CONSTANTS_CACHE = False
    own = None if _NO_LOCAL_CONSTANTS_CACHE is False else _NO_LOCAL_CONSTANTS_CACHE  # (an empty cache is falsy)
    if own is None:
        outside.cache.clear()
    else:
        providers.CONSTANTS_CACHE = own
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE = outside
        if own is None:
            outside.cache.clear()


_NO_LOCAL_CONSTANTS_CACHE = None  # Hypothesis' constants cache while local constants are off (False: none can be made)


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
    before = random_state()
    try:
        for check in checks:
            check.function(context)
    except ClauseFailure as failure:
        result.seed_dependent = context.seed_dependent(before)  # at the verdict, before the evidence is gathered
        result.status, result.message = "fail", failure.message
        result.counterexample, result.call = failure.table, failure.call
        result.cause, result.evidence, result.features = _evidence(context, clause, failure)
    except CandidateError as error:
        result.status, result.message = "error", str(error)
    except NotProvided as lack:
        result.status, result.message = "not-provided", str(lack)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the suite itself never crashes
        result.status, result.message = _unexpected(exc)
    if result.status != "fail":
        result.seed_dependent = context.seed_dependent(before)
    result.seconds = time.perf_counter() - start
    result.notes = context.notes
    result.conventions = context.conventions
    return result


KEPT_CALLS = 8  # the latest calls a failure's evidence looks at


def features(args: dict[str, Any]) -> set[str]:
    """Features of a call's input that a failure may turn on: each flag array set anywhere or nowhere, a scalar
    at 0 or 1, one step, several columns."""
    found: set[str] = set()
    for name, value in args.items():
        if isinstance(value, np.ndarray):
            if value.dtype == bool:
                found.add(f"{name} set" if value.any() else f"no {name}")
            elif value.ndim >= 1 and name == next(iter(args)):
                if value.shape[0] == 1:
                    found.add("one step")
                if value.ndim == 2 and value.shape[1] > 1:
                    found.add("several columns")
        elif isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
            if value == 0:
                found.add(f"{name} = 0")
            elif value == 1:
                found.add(f"{name} = 1")
    return found


def _singled_out(context: Context) -> list[str]:
    """Features every failing drawn example has and no passing one does (with passing ones to compare)."""
    failed = [f for bad, f in context.examples_seen if bad]
    passed = [f for bad, f in context.examples_seen if not bad]
    if not failed or len(passed) < 2:
        return []
    common = frozenset.intersection(*failed)
    return sorted(f for f in common if not any(f in p for p in passed))


def _precision_evidence(context: Context, failure: ClauseFailure) -> str:
    """When every discrepancy is within what a lower precision's arithmetic would give, say so: a precision, not
    an algorithm. Two tests, both needed: the check's bound widened to the lower precision (linear in the unit
    roundoff u to first order) holds the discrepancy, and on the failing input the candidate's outputs are the
    right answer up to what that precision's arithmetic actually gives there (signatures.within_lower_precision:
    the reference run again in float32). The second keeps a loose bound (one with a term that does not scale with
    u) from calling any error a precision; where it cannot be measured, nothing is claimed."""
    from . import signatures

    if failure.ratio is None or not context.calls:
        return ""
    u = context.calls[-1].unit_roundoff
    for name in ("float32", "bfloat16"):
        lower = protocol.UNIT_ROUNDOFF[name]
        if lower <= u:
            continue
        if failure.ratio <= lower / u and signatures.within_lower_precision(context.calls[-1], lower):
            return (f"precision: every discrepancy is within what {name} arithmetic gives (at most "
                    f"{failure.ratio:.3g} times the bound at the precision judged, a {name} bound is {lower / u:.3g} "
                    f"times as wide): if it computes or stores in {name}, declare RLSPEC_PRECISION "
                    f"(e.g. {{{context.calls[-1].operation!r}: {name!r}}}); no algorithmic cause is claimed")
        break  # only the next precision down: further down every algorithmic error would fit
    return ""


def _evidence(context: Context, clause: catalogue.Clause, failure: ClauseFailure) -> tuple[str, list[str], list[str]]:
    """``(likely cause, what else is known, features of the failing input)`` for a failed clause. A cause is
    claimed only with evidence: the outputs match one known mistake on the failing input (signatures), or the
    check's own diagnosis matched a known wrong answer; a clause's usual suspect alone is never printed as
    likely."""
    from . import signatures

    known: list[str] = []
    cause, listed = signatures.explain(context.calls, context.candidate.conventions)
    known += listed
    computed = failure.diagnosed if failure.diagnosed is not None else failure.cause != clause.likely_cause
    precision = "" if cause else _precision_evidence(context, failure)
    # a check's own diagnosis is printed unless the evidence speaks against it: several known mistakes give these
    # very outputs (the input cannot tell them apart, so neither can a check's table of wrong answers on it: GAE's
    # seed example has V(s_t) = V(s_{t+1}), two bootstraps, one number), or lower-precision arithmetic on this input
    # explains every discrepancy (a structural test such as L_clip <= L_IS fails by a rounding error in float32)
    if not cause and computed and failure.cause and not listed and not precision:
        cause = failure.cause
    if not cause and not listed and getattr(failure, "alternatives", ()):
        known.append("the outputs match each of these known mistakes: " + "; or ".join(failure.alternatives))
    if precision:
        known.append(precision)
    singled = _singled_out(context)
    if singled:
        known.append(f"every failing input drawn has {', '.join(singled)}; no passing one does")
    if not cause and not known:
        known.append(f"cause: not identified (the numbers match no known mistake); `rlspec explain {clause.id}` "
                     f"lists what usually breaks this clause")
    last = sorted(features(context.calls[-1].args)) if context.calls else []
    return cause, known, last


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
    if isinstance(exc, MemoryError) or "failed to map segment" in text or "Cannot allocate memory" in text:
        # the worker's address space is capped (--memory-limit, or RAM / (workers + 1)): the user's limit, not a bug
        return "error", (f"out of memory in rlspec's own code ({type(exc).__name__}); the worker's address space is "
                         f"capped: raise --memory-limit")
    return "error", f"internal error in rlspec ({type(exc).__name__}{': ' + text if text else ''}); please report it"

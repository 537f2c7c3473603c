"""pytest wiring for rlspec's own test suite.

The ``--rlspec-candidate`` / ``--rlspec-profile`` options and the ``rlspec_candidate`` fixture come
from the installed plugin (``rlspec.checks.pytest_plugin``, a ``pytest11`` entry point), so any
project can run the conformance suite inside its own tests. This file adds what the suite's own
tests share: Hypothesis profiles and the fixture candidates (mutants, correct variants, bad ones).
"""

from __future__ import annotations

import copy
import functools
import os
import runpy
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).parent
MUTANTS = sorted((ROOT / "tests" / "mutants").glob("*.py"))
VARIANTS = sorted((ROOT / "tests" / "variants").glob("*.py"))
BAD = sorted((ROOT / "tests" / "bad").glob("*.py"))

# A test that repeats what other tests already run under coverage (the same candidate through the same code:
# another seed, another rerun, another profile or dtype of a run traced elsewhere) is marked REPEAT and runs with the
# tracer paused: its lines are counted by those other tests, and the tracer nearly doubles the time of an in-process
# conformance run. What the repeats would add was measured line by line (docs/speed.md: six lines, rare drawn
# branches, which those tests still run); RLSPEC_COVER_REPEATS=1 traces them too, to measure that again.
# (Not pytest-cov's own no_cover marker: that one raises under --no-cov.)
REPEAT = pytest.mark.repeat


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """A repeat's fixtures are paused too (tests/test_reproducibility.py's first run of the reference is one)."""
    yield from _untraced(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _untraced(item)


def _untraced(item):
    running = []
    if item.get_closest_marker("repeat") is not None and not os.environ.get("RLSPEC_COVER_REPEATS"):
        try:
            import coverage
        except ImportError:  # pragma: no cover - coverage is a dev dependency
            coverage = None
        if coverage is not None:
            # Every started Coverage, not only the latest: an xdist worker has two (pytest-cov's and one started at
            # the worker's start), and stopping the latest alone resumes the other's tracer (Collector.stop).
            running = list(getattr(coverage.Coverage, "_instances", None) or filter(None, [coverage.Coverage.current()]))
    for tracer in reversed(running):
        tracer.stop()
    yield
    for tracer in running:
        tracer.start()


def _untraced_fork_child() -> None:
    """A forked child (rlspec's isolation workers, the proof pool) inherits the coverage tracer, but its data is
    never saved (coverage is not set up to follow a fork: checks/runner/worker.py's worker start is reported
    missed), so the tracing there only doubles the child's time. Nothing that is counted is lost."""
    sys.settrace(None)
    threading.settrace(None)


os.register_at_fork(after_in_child=_untraced_fork_child)


# Files holding tests of tens of seconds each (a regeneration of the vectors, the wheel build, a book build, whole
# isolated runs) are collected first. The test workers share the collection by work stealing, one test at a time: a
# long test collected last (tests/test_vectors.py sorts last by name and holds the two longest) ends the run on one
# worker while the other idles; collected first, it overlaps the other worker's short tests. Order within a file is
# kept (module fixtures), and no test depends on another's order.
LONG_FIRST = ("tests/test_vectors.py", "tests/test_reproducibility.py", "tests/test_book.py", "tests/test_isolation.py",
              "tests/test_first_contact.py")


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))  # stable


def pytest_configure(config):
    config.addinivalue_line("markers", "repeat: a repeat of what another test runs under coverage; runs untraced")


# For the suite's own property tests (strategies, reference); the conformance checks set their own.
settings.register_profile("dev", max_examples=30, deadline=None, database=None)
settings.register_profile("ci", max_examples=100, deadline=None, database=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def mutant_metadata(path: Path) -> dict:
    """A mutant's ``RLSPEC_MUTANT``: the clauses that must catch it and the bug it reproduces (a copy: the file is
    run once per test process; tests/test_catalogue.py alone asked for every mutant's 174 times)."""
    return copy.deepcopy(_mutant_metadata(Path(path)))


@functools.cache
def _mutant_metadata(path: Path) -> dict:
    return runpy.run_path(str(path))["RLSPEC_MUTANT"]

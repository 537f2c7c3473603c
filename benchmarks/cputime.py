"""A pytest plugin that says where the test suite's CPU time goes: per test file, per test, per phase.

    PYTHONPATH=benchmarks python -m pytest -p cputime -n 0 --no-cov -p no:randomly tests/test_mutants.py
    RLSPEC_CPUTIME_JSON=out.json ...                      # also write every test's figures as JSON

CPU time is user + system of this process and of the children it waited for (``os.times()``): on a shared
machine it moves far less than wall time, which is printed beside it. Run it in one process (``-n 0``): under
xdist each worker would report its own share. A fixture's setup is charged to the first test that needs it
(the ``setup`` column), as pytest runs it. Nothing asserts: this reports (docs/speed.md).
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict

import pytest

_TESTS: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _timed(item, phase: str):
    cpu, wall = _cpu(), time.perf_counter()
    yield
    figures = _TESTS[item.nodeid]
    figures[f"{phase}_cpu"] += _cpu() - cpu
    figures[f"{phase}_wall"] += time.perf_counter() - wall


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _timed(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _timed(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _timed(item, "teardown")


def _total(figures, kind: str) -> float:
    return sum(v for k, v in figures.items() if k.endswith(kind))


def pytest_terminal_summary(terminalreporter):
    if not _TESTS:
        return
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for nodeid, figures in _TESTS.items():
        row = files[nodeid.split("::")[0]]
        row[0] += _total(figures, "_cpu")
        row[1] += _total(figures, "_wall")
        row[2] += figures.get("setup_cpu", 0.0)
        row[3] += 1
    write = terminalreporter.write_line
    write("")
    write(f"{'CPU time per test file (user+sys, incl. children)':<52} {'cpu s':>8} {'wall s':>8} {'setup cpu':>9} {'tests':>6}")
    for name, (cpu, wall, setup, count) in sorted(files.items(), key=lambda kv: -kv[1][0]):
        write(f"{name:<52} {cpu:8.1f} {wall:8.1f} {setup:9.1f} {count:6d}")
    write(f"{'total':<52} {sum(r[0] for r in files.values()):8.1f} {sum(r[1] for r in files.values()):8.1f}")
    slowest = sorted(_TESTS.items(), key=lambda kv: -_total(kv[1], "_cpu"))[:15]
    write("slowest tests (cpu s): " + "; ".join(f"{n.split('::', 1)[1]} {_total(f, '_cpu'):.1f}" for n, f in slowest))
    target = os.environ.get("RLSPEC_CPUTIME_JSON")
    if target:
        with open(target, "w") as out:
            json.dump({n: dict(f) for n, f in _TESTS.items()}, out, indent=0)

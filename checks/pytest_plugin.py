"""pytest plugin (entry point ``pytest11: rlspec``): run the conformance suite inside a test run.

    pytest --rlspec-candidate my_adapter.py [--rlspec-profile ci] [--rlspec-require gae] [-n 2]

adds one test item per clause, collected under the candidate's own file: the node ids are
``my_adapter.py::GAE-SEED-EXAMPLE`` (rootdir-relative), so a clause is selected as any test is
(``pytest --rlspec-candidate my_adapter.py my_adapter.py::GAE-SEED-EXAMPLE``, ``-k TRUNCATION``,
``--deselect``), and the counts pytest prints are real collected / deselected / selected numbers. A dotted or
built-in candidate is collected under its module's file. Without ``--rlspec-candidate`` the plugin adds
nothing, so it is harmless in any project's test run. A candidate that cannot load, provides no operation,
has a name near an operation's or lacks a required one stops the run as a usage error (one line).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("rlspec", "rlspec conformance suite")
    group.addoption("--rlspec-candidate", metavar="SPEC", help="check this candidate (built-in name, module or file)")
    group.addoption("--rlspec-profile", default="quick", choices=["quick", "ci", "thorough"])
    group.addoption("--rlspec-seed", type=int, default=0)
    group.addoption("--rlspec-dtype", default="float64", choices=["float64", "float32"])
    group.addoption("--rlspec-only", metavar="PATTERN", help="comma-separated clause ids, globs or chapters")
    group.addoption("--rlspec-xfail", metavar="FILE", help="expected deviations, CLAUSE-ID  # reason per line")
    group.addoption("--rlspec-xfail-strict", action="store_true", help="an xfail entry whose clause passes fails")
    group.addoption("--rlspec-require", metavar="OPS", help="operations the candidate must provide (comma-separated)")


def _options(config) -> dict:
    return {
        "profile": config.getoption("rlspec_profile"),
        "seed": config.getoption("rlspec_seed"),
        "dtype": config.getoption("rlspec_dtype"),
        "xfail_strict": config.getoption("rlspec_xfail_strict"),
    }


def _require(config) -> list[str]:
    return [r.strip() for r in (config.getoption("rlspec_require") or "").split(",") if r.strip()]


def _anchor(spec: str) -> Path:
    """The file the clauses are collected under: the candidate's own file, or its module's."""
    from .loader import ADAPTERS, BUILTIN

    target = spec.partition(":")[0]
    if target.endswith(".py") or Path(target).is_file():
        return Path(target).resolve()
    name = BUILTIN.get(target) or (f"{ADAPTERS}.{target.replace('-', '_')}" if f"{ADAPTERS}.{target.replace('-', '_')}" in sys.modules else target)
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None) or getattr(importlib.util.find_spec(name), "origin", None)
    return Path(origin).resolve()


def pytest_configure(config):
    spec = config.getoption("rlspec_candidate")
    if not spec:
        return
    from .engine import UsageError, select
    from .loader import LoadError, load

    try:
        select(config.getoption("rlspec_only"))
        candidate = load(spec, overrides={"RLSPEC_REQUIRE": _require(config)})
        anchor = _anchor(spec)
    except (LoadError, UsageError) as exc:
        raise pytest.UsageError(f"rlspec: {exc}") from None
    config._rlspec = {"candidate": candidate, "anchor": anchor}
    if not any(Path(str(a).split("::")[0]).resolve() == anchor for a in config.args):
        config.args.append(str(anchor))


def _is_anchor(parent, path) -> bool:
    state = getattr(parent.config, "_rlspec", None)
    return bool(state) and Path(path).resolve() == state["anchor"]


def pytest_collect_file(file_path, parent):
    """The candidate's file, found by a directory walk or named on the command line, collects the clauses."""
    if _is_anchor(parent, file_path):
        return CandidateFile.from_parent(parent, path=Path(file_path))
    return None


def pytest_pycollect_makemodule(module_path, parent):
    """...and is not also imported as a test module (it holds no tests)."""
    if _is_anchor(parent, module_path):
        return _Nothing.from_parent(parent, path=Path(module_path))
    return None


class _Nothing(pytest.File):
    def collect(self):
        return []


def pytest_report_header(config):
    spec = config.getoption("rlspec_candidate")
    if spec:
        o = _options(config)
        return f"rlspec: candidate {spec}, profile {o['profile']}, seed {o['seed']}, {o['dtype']}"
    return None


class CandidateFile(pytest.File):
    """The candidate's file as a collector of one item per selected clause."""

    def collect(self):
        from .engine import select

        state = self.config._rlspec
        for clause in select(self.config.getoption("rlspec_only")):
            yield ClauseItem.from_parent(self, name=clause.id, clause=clause, candidate=state["candidate"],
                                         options=_options(self.config), xfail=self.config.getoption("rlspec_xfail"))


class ClauseItem(pytest.Item):
    """One catalogue clause checked against the candidate."""

    def __init__(self, *, clause, candidate, options, xfail, **kwargs):
        super().__init__(**kwargs)
        self.clause, self.candidate, self.options, self.xfail = clause, candidate, options, xfail
        self.result = None

    def runtest(self):
        from .engine import run_conformance

        run = run_conformance(self.candidate, clauses=[self.clause.id], xfail=self.xfail, **self.options)
        self.result = result = run.results[0]
        if result.status in ("fail", "error"):
            raise ClauseVerdict(result)
        if result.status == "xfail":
            pytest.xfail("; ".join(result.notes) or "declared deviation")
        if result.status in ("skip", "not-provided"):
            pytest.skip(f"{result.status}: {result.message}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ClauseVerdict):
            from .report import details

            return details(excinfo.value.result)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"rlspec {self.clause.id}"


class ClauseVerdict(Exception):
    def __init__(self, result):
        super().__init__(result.message)
        self.result = result


@pytest.fixture(scope="session")
def rlspec_candidate(request):
    """The candidate named by ``--rlspec-candidate`` (loaded once), for a project's own extra tests."""
    state = getattr(request.config, "_rlspec", None)
    if state is None:
        pytest.skip("no --rlspec-candidate given")
    return state["candidate"]

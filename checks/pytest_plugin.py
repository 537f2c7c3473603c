"""pytest plugin (entry point ``pytest11: rlspec``): run the conformance suite inside a test run.

    pytest --rlspec-candidate my_adapter.py [--rlspec-profile ci] [--rlspec-require gae] [-n 2]

adds one test item per clause, collected under the candidate's own file: the node ids are
``my_adapter.py::GAE-SEED-EXAMPLE`` (rootdir-relative), so a clause is selected as any test is
(``pytest --rlspec-candidate my_adapter.py my_adapter.py::GAE-SEED-EXAMPLE``, ``-k TRUNCATION``,
``--deselect``), and the counts pytest prints are real collected / deselected / selected numbers. A dotted or
built-in candidate is collected under its module's file. Without ``--rlspec-candidate`` the plugin adds
nothing, so it is harmless in any project's test run. A candidate that cannot load, provides no operation,
has a name near an operation's or lacks a required one stops the run as a usage error (one line).

The plugin reads the project's ``[tool.rlspec]`` (checks/runner/config.py) as ``rlspec check`` does: the first
``pyproject.toml`` with that table from the folder pytest was started in upwards, or ``--rlspec-config FILE``;
the same validation and the same one-line errors (a usage error here); an option on the command line wins.
``pytest --rlspec`` runs the table's ``candidate``. Its candidate, profile, seed, dtype, device, only, require,
xfail, xfail-strict, precision and conventions apply; json, junit, workers, time-limit, memory-limit, color and
annotate belong to the command line (pytest has ``--junitxml`` and ``-n``). A declared deviation that fails is
pytest's ``xfailed``; one that passes is pytest's unexpected pass, XPASS, and with ``xfail-strict`` (rlspec's, or
else pytest's own ``xfail_strict`` ini option) a failure ``[XPASS(strict)]``, as for an ``xfail`` mark.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


DEFAULTS = {"profile": "quick", "seed": 0, "dtype": "float64", "device": "cpu"}


def pytest_addoption(parser):
    group = parser.getgroup("rlspec", "rlspec conformance suite")
    group.addoption("--rlspec-candidate", metavar="SPEC", help="check this candidate (built-in name, module or file)")
    group.addoption("--rlspec", action="store_true", help="check the candidate [tool.rlspec] names")
    group.addoption("--rlspec-config", metavar="FILE", help="read [tool.rlspec] from this pyproject.toml (default: the "
                    "first one with that table from the folder pytest was started in upwards)")
    group.addoption("--rlspec-profile", default=None, choices=["quick", "ci", "thorough"], help="default quick")
    group.addoption("--rlspec-seed", type=int, default=None, help="default 0")
    group.addoption("--rlspec-dtype", default=None, choices=["float64", "float32"], help="default float64")
    group.addoption("--rlspec-device", default=None, metavar="DEVICE", help="cpu (the default) or cuda")
    group.addoption("--rlspec-only", metavar="PATTERN", help="comma-separated clause ids, globs or chapters")
    group.addoption("--rlspec-xfail", metavar="FILE", help="expected deviations, CLAUSE-ID  # reason per line")
    group.addoption("--rlspec-xfail-strict", action="store_true", default=None,
                    help="an xfail entry whose clause passes (XPASS) fails, as pytest's xfail_strict")
    group.addoption("--rlspec-require", metavar="OPS", help="operations the candidate must provide (comma-separated)")


def _settings(config) -> dict:
    """The command line over ``[tool.rlspec]`` over the defaults (as ``rlspec check`` has them); raises
    pytest.UsageError with the CLI's one line for a table it cannot accept."""
    from .runner import config as config_
    from .runner.engine import PROFILES, UsageError, read_xfail_file

    named = config.getoption("rlspec_config")
    try:
        if named and not Path(named).is_file():
            raise config_.ConfigError(f"--rlspec-config {named}: no such file")
        table = config_.read(named or config_.find(Path(config.invocation_params.dir)))
    except config_.ConfigError as exc:
        raise pytest.UsageError(f"rlspec: {exc}") from None
    given = lambda key: config.getoption(f"rlspec_{key}")  # noqa: E731
    settings = {key: given(key) if given(key) is not None else table.get(key, default) for key, default in DEFAULTS.items()}
    settings["candidate"] = given("candidate") or table.get("candidate")
    settings["only"] = given("only") if given("only") is not None else table.get("only")
    if given("xfail_strict") is not None:
        strict = given("xfail_strict")
    elif "xfail_strict" in table.values:
        strict = table.get("xfail_strict")
    else:
        strict = bool(config.getini("xfail_strict"))  # pytest's own: how it treats an xfail mark that passes
    settings["xfail_strict"] = strict
    where = f"{table.path}: [tool.rlspec]"
    if settings["profile"] not in PROFILES:
        raise pytest.UsageError(f"rlspec: {where} profile = {settings['profile']!r}; choose one of {', '.join(PROFILES)}")
    if settings["dtype"] not in ("float64", "float32"):
        raise pytest.UsageError(f"rlspec: {where} dtype = {settings['dtype']!r}; choose float64 or float32")
    overrides = table.overrides
    overrides["RLSPEC_REQUIRE"] = [r.strip() for r in (given("require") or "").split(",") if r.strip()] + list(
        table.get("require", []))
    xfail, replay = {}, []
    try:
        if given("xfail"):
            xfail, _ = read_xfail_file(given("xfail"))
            replay += ["--xfail", str(Path(given("xfail")).resolve())]
        elif isinstance(table.get("xfail"), str):
            xfail, _ = read_xfail_file(table.get("xfail"))
        elif isinstance(table.get("xfail"), dict):
            overrides["RLSPEC_XFAIL"] = table.get("xfail")
    except UsageError as exc:
        raise pytest.UsageError(f"rlspec: {exc}") from None
    if table.path is not None:
        replay = ["--config", str(table.path), *replay]
    return {**settings, "overrides": overrides, "xfail": xfail, "replay": replay, "config": table.path}


def _options(settings: dict) -> dict:
    """What every clause's run_conformance takes (strictness is the report's: see pytest_runtest_makereport)."""
    return {key: settings[key] for key in ("profile", "seed", "dtype", "device")} | {"replay_extra": settings["replay"]}


def _anchor(spec: str) -> Path:
    """The file the clauses are collected under: the candidate's own file, or its module's."""
    from .runner.loader import ADAPTERS, BUILTIN

    target = spec.partition(":")[0]
    if target.endswith(".py") or Path(target).is_file():
        return Path(target).resolve()
    name = BUILTIN.get(target) or (f"{ADAPTERS}.{target.replace('-', '_')}" if f"{ADAPTERS}.{target.replace('-', '_')}" in sys.modules else target)
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None) or getattr(importlib.util.find_spec(name), "origin", None)
    return Path(origin).resolve()


def pytest_configure(config):
    if not (config.getoption("rlspec_candidate") or config.getoption("rlspec")):
        return
    from .runner.engine import UsageError, select
    from .runner.loader import LoadError, load

    settings = _settings(config)
    spec = settings["candidate"]
    if not spec:
        raise pytest.UsageError(f"rlspec: --rlspec needs a candidate: [tool.rlspec] candidate = ... in "
                                f"{settings['config'] or 'a pyproject.toml (none found)'}, or --rlspec-candidate SPEC")
    try:
        select(settings["only"])
        candidate = load(spec, device=settings["device"], overrides=settings["overrides"])
        anchor = _anchor(spec)
    except (LoadError, UsageError) as exc:
        raise pytest.UsageError(f"rlspec: {exc}") from None
    # every declared deviation with its reason: the candidate's own RLSPEC_XFAIL, overridden by the xfail file
    reasons = {**candidate.xfail, **settings["xfail"]}
    config._rlspec = {"candidate": candidate, "anchor": anchor, "settings": settings, "reasons": reasons}
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
    state = getattr(config, "_rlspec", None)
    if state:
        o = state["settings"]
        read = f" ({o['config']})" if o["config"] else ""
        return f"rlspec: candidate {o['candidate']}, profile {o['profile']}, seed {o['seed']}, {o['dtype']}{read}"
    return None


class CandidateFile(pytest.File):
    """The candidate's file as a collector of one item per selected clause."""

    def collect(self):
        from .runner.engine import select

        state = self.config._rlspec
        settings = state["settings"]
        for clause in select(settings["only"]):
            yield ClauseItem.from_parent(self, name=clause.id, clause=clause, candidate=state["candidate"],
                                         options=_options(settings), xfail=settings["xfail"])


class ClauseItem(pytest.Item):
    """One catalogue clause checked against the candidate."""

    def __init__(self, *, clause, candidate, options, xfail, **kwargs):
        super().__init__(**kwargs)
        self.clause, self.candidate, self.options, self.xfail = clause, candidate, options, xfail
        self.result = None

    def runtest(self):
        from .runner.engine import run_conformance

        # never strict here: a clause that passes passes; pytest_runtest_makereport makes it pytest's XPASS
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A declared deviation whose clause passes is reported as pytest reports an ``xfail`` mark that passes: an
    unexpected pass (XPASS: ``wasxfail`` on a pass), or with xfail-strict a failure ``[XPASS(strict)]``."""
    outcome = yield
    result = getattr(item, "result", None)
    if not isinstance(item, ClauseItem) or call.when != "call" or result is None or not result.xpass:
        return
    report = outcome.get_result()
    state = item.config._rlspec
    reason = state["reasons"].get(item.clause.id, "declared deviation")
    if state["settings"]["xfail_strict"]:
        report.outcome = "failed"
        report.longrepr = (f"[XPASS(strict)] {reason}: {item.clause.id} is declared as a deviation but conforms; "
                           f"remove its xfail entry")
    else:
        report.outcome = "passed"
        report.wasxfail = reason


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

"""pytest plugin (entry point ``pytest11: rlspec``): run the conformance suite inside a test run.

    pytest --rlspec-candidate mypkg.rlspec_adapter [--rlspec-profile ci] [-n 2]

adds one test item per clause (``rlspec[CANDIDATE]::CLAUSE-ID``). Without ``--rlspec-candidate``
the plugin adds nothing, so it is harmless in any project's test run.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("rlspec", "rlspec conformance suite")
    group.addoption("--rlspec-candidate", metavar="SPEC", help="check this candidate (built-in name, module or file)")
    group.addoption("--rlspec-profile", default="quick", choices=["quick", "ci", "thorough"])
    group.addoption("--rlspec-seed", type=int, default=0)
    group.addoption("--rlspec-dtype", default="float64", choices=["float64", "float32"])
    group.addoption("--rlspec-only", metavar="PATTERN", help="comma-separated clause ids, globs or chapters")
    group.addoption("--rlspec-xfail", metavar="FILE", help="expected deviations, CLAUSE-ID  # reason per line")


def _options(config) -> dict:
    return {
        "profile": config.getoption("rlspec_profile"),
        "seed": config.getoption("rlspec_seed"),
        "dtype": config.getoption("rlspec_dtype"),
    }


def pytest_report_header(config):
    spec = config.getoption("rlspec_candidate")
    if spec:
        o = _options(config)
        return f"rlspec: candidate {spec}, profile {o['profile']}, seed {o['seed']}, {o['dtype']}"
    return None


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


class CandidateCollector(pytest.Collector):
    def __init__(self, *, candidate, options, xfail, only, **kwargs):
        super().__init__(**kwargs)
        self.candidate, self.options, self.xfail, self.only = candidate, options, xfail, only

    def collect(self):
        from .engine import select

        for clause in select(self.only):
            yield ClauseItem.from_parent(
                self, name=clause.id, clause=clause, candidate=self.candidate, options=self.options, xfail=self.xfail
            )


def pytest_collection_modifyitems(session, config, items):
    spec = config.getoption("rlspec_candidate")
    if not spec:
        return
    from .engine import UsageError
    from .loader import LoadError, load

    try:
        candidate = load(spec)
        collector = CandidateCollector.from_parent(
            session,
            name=f"rlspec[{spec}]",
            candidate=candidate,
            options=_options(config),
            xfail=config.getoption("rlspec_xfail"),
            only=config.getoption("rlspec_only"),
        )
        items.extend(collector.collect())
    except (LoadError, UsageError) as exc:
        raise pytest.UsageError(f"rlspec: {exc}") from None


@pytest.fixture(scope="session")
def rlspec_candidate(request):
    """The candidate named by ``--rlspec-candidate`` (loaded once), for a project's own extra tests."""
    from .loader import load

    spec = request.config.getoption("rlspec_candidate")
    if not spec:
        pytest.skip("no --rlspec-candidate given")
    return load(spec)

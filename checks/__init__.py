"""Conformance checks: the candidate protocol and loader, Hypothesis strategies, the clause checks,
the engine, the command line and the reports.

    from . import run_conformance
    assert run_conformance("mypkg.rlspec_adapter", profile="ci").ok

Names are imported on first use, so the pytest plugin costs nothing in a test run that does not
ask for a candidate.
"""

import importlib

_EXPORTS = {
    "run_conformance": ".engine",
    "ClauseResult": ".engine",
    "ConformanceResult": ".engine",
    "load": ".loader",
    "LoadError": ".loader",
    "OPERATIONS": ".protocol",
    "Candidate": ".protocol",
    "CandidateError": ".protocol",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'rlspec.checks' has no attribute {name!r}")

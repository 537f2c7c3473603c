"""Conformance checks: the candidate protocol and loader, Hypothesis strategies, the clause checks,
the engine, the command line and the reports.

    from rlspec.checks import run_conformance
    assert run_conformance("mypkg.rlspec_adapter", profile="ci").ok
"""

from rlspec.checks.engine import ClauseResult, ConformanceResult, run_conformance
from rlspec.checks.loader import LoadError, load
from rlspec.checks.protocol import OPERATIONS, Candidate, CandidateError

__all__ = [
    "OPERATIONS",
    "Candidate",
    "CandidateError",
    "ClauseResult",
    "ConformanceResult",
    "LoadError",
    "load",
    "run_conformance",
]

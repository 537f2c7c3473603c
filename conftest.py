"""pytest wiring for rlspec's own test suite.

The ``--rlspec-candidate`` / ``--rlspec-profile`` options and the ``rlspec_candidate`` fixture come
from the installed plugin (``rlspec.checks.pytest_plugin``, a ``pytest11`` entry point), so any
project can run the conformance suite inside its own tests. This file adds what the suite's own
tests share: Hypothesis profiles and the fixture candidates (mutants, correct variants, bad ones).
"""

from __future__ import annotations

import os
import runpy
from pathlib import Path

from hypothesis import HealthCheck, settings

ROOT = Path(__file__).parent
MUTANTS = sorted((ROOT / "tests" / "mutants").glob("*.py"))
VARIANTS = sorted((ROOT / "tests" / "variants").glob("*.py"))
BAD = sorted((ROOT / "tests" / "bad").glob("*.py"))

# For the suite's own property tests (strategies, reference); the conformance checks set their own.
settings.register_profile("dev", max_examples=30, deadline=None, database=None)
settings.register_profile("ci", max_examples=100, deadline=None, database=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def mutant_metadata(path: Path) -> dict:
    """A mutant's ``RLSPEC_MUTANT``: the clauses that must catch it and the bug it reproduces."""
    return runpy.run_path(str(path))["RLSPEC_MUTANT"]

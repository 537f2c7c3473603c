"""The upstream-ready reports for TRL (docs/upstream/trl-N.md): each reproduction runs against the installed library
and prints what its report quotes (tests/adapters/_upstream.py).

Skipped when trl is not installed, unless RLSPEC_REQUIRE_ADAPTERS=1 (.ci/adapters), where a missing library is an error.
"""

import os

import pytest

if os.environ.get("RLSPEC_REQUIRE_ADAPTERS"):
    import trl  # noqa: F401 - .ci/adapters: the library must be there
else:
    pytest.importorskip("trl")

from _upstream import reproduction_tests  # noqa: E402

test_report_is_well_formed, test_reproduction_prints_what_the_report_quotes, test_every_report_of_the_library_is_run = (
    reproduction_tests("trl"))

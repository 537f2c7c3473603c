"""The upstream-ready reports for skrl (docs/upstream/skrl-N.md): each reproduction runs against the installed
library and prints what its report quotes (tests/adapters/_upstream.py).

Skipped when skrl is not installed, unless RLSPEC_REQUIRE_ADAPTERS=1 (.ci/adapters), where a missing library is an
error.
"""

import os

import pytest

if os.environ.get("RLSPEC_REQUIRE_ADAPTERS"):
    import skrl  # noqa: F401 - .ci/adapters: the library must be there
else:
    pytest.importorskip("skrl")

from _upstream import reproduction_tests  # noqa: E402

test_report_is_well_formed, test_reproduction_prints_what_the_report_quotes, test_every_report_of_the_library_is_run = (
    reproduction_tests("skrl"))

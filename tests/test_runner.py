"""The runner's cost structure (what a run imports and starts), checked as facts, never as timings: the
timings themselves are benchmarks/' business."""

from __future__ import annotations

import json
import subprocess
import sys

AFTER_A_RUN = """
import json, sys
from rlspec.checks import run_conformance
run = run_conformance("reference")
print(json.dumps({"ok": run.ok, "modules": sorted(m for m in ("sympy", "scipy", "matplotlib") if m in sys.modules)}))
"""


def test_checking_the_reference_imports_no_sympy():
    """torch imports SymPy (half a second) the first time autograd is given ``grad_outputs``; the checks
    take gradients of a weighted sum instead, and nothing else a run needs imports SymPy, SciPy or
    matplotlib. A new check that does pays that on every run: this says which."""
    done = subprocess.run([sys.executable, "-c", AFTER_A_RUN], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == {"ok": True, "modules": []}

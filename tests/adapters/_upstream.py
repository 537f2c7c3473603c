"""The upstream-ready reports in docs/upstream/ (one per defect of docs/bugs-found.md not known upstream), and the
test that runs each report's reproduction against the installed library and compares what it prints with what the
report says it prints.

A report ``docs/upstream/LIBRARY-N.md`` (N: its entry in docs/bugs-found.md) holds one library-only reproduction, a
```python block of fewer than 30 lines that imports no rlspec, and right after it a ```text block with its standard
output, byte for byte. A library's test file binds :func:`reproduction_tests`; it runs in that library's adapter
environment (.ci/adapters), skipped elsewhere like the adapter's own tests.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

UPSTREAM = Path(__file__).resolve().parents[2] / "docs" / "upstream"
BLOCKS = re.compile(r"```python\n(?P<code>.*?)```\s*\n(?:[^`]*?\n)?```text\n(?P<output>.*?)```", re.S)


def reports(library: str) -> list[Path]:
    return sorted(UPSTREAM.glob(f"{library}-*.md"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))


def reproduction(path: Path) -> tuple[str, str]:
    """(the reproduction's code, the output the report quotes)."""
    found = BLOCKS.search(path.read_text(encoding="utf-8"))
    if not found:
        raise ValueError(f"{path.name}: no ```python reproduction followed by a ```text block of its output")
    return found.group("code"), found.group("output")


def reproduction_tests(library: str):
    """The tests of one library's reports: each is well formed, and its reproduction prints what it quotes."""
    paths = reports(library)

    @pytest.mark.parametrize("path", paths, ids=[p.stem for p in paths])
    def test_report_is_well_formed(path):
        code, _ = reproduction(path)
        text = path.read_text(encoding="utf-8")
        assert len(code.splitlines()) < 30, f"{path.name}: the reproduction has {len(code.splitlines())} lines (30 or more)"
        assert "rlspec" not in code, f"{path.name}: the reproduction imports rlspec"
        for heading in ("## Versions", "## Reproduction", "## Expected", "## Mechanism", "## Searched"):
            assert heading in text, f"{path.name}: no '{heading}' section"

    @pytest.mark.parametrize("path", paths, ids=[p.stem for p in paths])
    def test_reproduction_prints_what_the_report_quotes(path, tmp_path):
        code, output = reproduction(path)
        run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, f"{path.name}: the reproduction exited {run.returncode}:\n{run.stderr[-2000:]}"
        assert run.stdout == output, f"{path.name}: it printed\n{run.stdout}\nthe report quotes\n{output}"

    def test_every_report_of_the_library_is_run():
        assert paths, f"no docs/upstream/{library}-*.md"

    return test_report_is_well_formed, test_reproduction_prints_what_the_report_quotes, test_every_report_of_the_library_is_run

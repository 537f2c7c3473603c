"""docs/bugs-found.md's machine-readable lines: the one reader of them (the book links a red matrix cell to
its entry through it; tests/adapters/test_matrix_verdicts.py checks that every red cell has one).

Each entry names the cells it explains on a line of its own::

    Cells: `skrl` GAE-SEED-EXAMPLE-TRUNCATED, GRID-*; `skrl:time_limit_bootstrap` GAE-TERMINAL-NO-BOOTSTRAP

(clause patterns may end in ``*``). A defect is a numbered section (``## N. ...``) with its smallest library-only
reproduction, the version and the upstream status; a red cell that is not a defect is a bullet under
``## Not a defect``, with its own ``Cells:`` line and the reason.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

PREFIX = "Cells: "


@dataclass(frozen=True)
class Explanation:
    heading: str  # the section's heading text ("1. skrl: truncation ignored ...", "Not a defect")
    defect: bool  # a numbered entry (a defect), or a bullet of "Not a defect"
    candidate: str  # the matrix column: an adapter, or adapter:variant
    patterns: tuple[str, ...]  # clause ids, or globs such as GRID-*

    def covers(self, candidate: str, clause_id: str) -> bool:
        return candidate == self.candidate and any(fnmatch.fnmatchcase(clause_id, p) for p in self.patterns)


def explanations(text: str) -> list[Explanation]:
    """Every ``Cells:`` line of the file, in order; ValueError (one line) for a line that cannot be read."""
    out, heading, defect = [], "", False
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()  # a bullet's Cells line is indented
        if line.startswith("## "):
            heading = line[3:].strip()
            defect = bool(re.match(r"\d+\.", heading))
        if not line.startswith(PREFIX):
            continue
        for part in line[len(PREFIX):].split(";"):
            found = re.fullmatch(r"\s*`([^`]+)`\s+(.+?)\s*", part)
            if not found:
                raise ValueError(f"bugs-found.md:{number} ({heading}): cannot read {part!r} (expected `candidate` CLAUSE, CLAUSE-*)")
            patterns = tuple(p.strip() for p in found.group(2).split(",") if p.strip())
            out.append(Explanation(heading, defect, found.group(1), patterns))
    return out

"""Each defect of docs/bugs-found.md, with the releases it affects, read off the matrix history.

    rlspec matrix --affected docs/bugs-found.md      # rewrite its "Affected releases:" lines from docs/matrix-history

A numbered entry names its matrix cells on ``Cells:`` lines (:mod:`rlspec.checks.matrix.bugs_found`). For each library
release in the history (the adapter's release history: ``history.series``, the run configuration most of its
records share) the entry is *affected* when one of those cells
is FAIL or error there, *not affected* when each of them that the release provides passes (or is a declared
deviation), and *not provided* when none of them is provided. The line written under the entry's ``Version:`` line
(or its ``Cells:`` line) lists the affected releases as runs of consecutive checked releases, and the others::

    Affected releases (docs/matrix-history, profile ci): `sb3` 2.0.0 – 2.9.2 (13 of 13 checked)
    Affected releases (docs/matrix-history, profile ci): `skrl` 2.0.0 – 2.1.1 (3 of 3 checked); not affected: 1.4.3

The line is generated, never typed: tests/test_releases.py checks that the committed file is what this writes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from . import bugs_found

PREFIX = "Affected releases"
RED = ("fail", "error")
PROVIDED = ("pass", "fail", "error", "xfail")


def release_of(record: dict) -> str:
    """The library release a history record holds: its ``release``, else the first version number of its version string."""
    if record.get("release"):
        return str(record["release"])
    found = re.search(r"\d+(?:\.\d+)+\w*", str(record.get("version", "")))
    return found.group(0) if found else str(record.get("version", "?"))


def states(explanations: list, records: list[dict]) -> list[tuple[str, str]]:
    """(release, affected | not-affected | not-provided) per record, in the records' order."""
    out = []
    for record in records:
        columns = {c.get("candidate"): {r.get("id"): r.get("status") for r in c.get("run", {}).get("clauses", [])}
                   for c in record.get("report", {}).get("candidates", [])}
        named = [status for x in explanations for clause, status in columns.get(x.candidate, {}).items()
                 if x.covers(x.candidate, clause)]
        if any(s in RED for s in named):
            state = "affected"
        elif any(s in PROVIDED for s in named):
            state = "not-affected"
        else:
            state = "not-provided"
        out.append((release_of(record), state))
    return out


def runs(releases: list[str], chosen: set[str]) -> list[str]:
    """The chosen releases as runs over ``releases`` (consecutive ones joined: ``2.0.0 – 2.3.2``)."""
    out, current = [], []
    for r in releases + [None]:
        if r is not None and r in chosen:
            current.append(r)
            continue
        if current:
            out.append(current[0] if len(current) == 1 else f"{current[0]} – {current[-1]}")
            current = []
    return out


def line(explanations: list, history: dict[str, list[dict]], indexes: dict[str, dict] | None = None) -> str:
    """The entry's "Affected releases" line."""
    indexes = indexes or {}
    by_adapter: dict[str, list] = {}
    for x in explanations:
        by_adapter.setdefault(x.candidate.partition(":")[0], []).append(x)
    parts = []
    for adapter, xs in by_adapter.items():
        records = history.get(adapter, [])
        if not records:
            parts.append(f"`{adapter}` not in the history")
            continue
        seen = states(xs, records)
        order = [r for r, _ in seen]
        affected = {r for r, s in seen if s == "affected"}
        clear = {r for r, s in seen if s == "not-affected"}
        absent = {r for r, s in seen if s == "not-provided"}
        text = f"`{adapter}` " + (", ".join(runs(order, affected)) if affected else "none")
        text += f" ({len(affected)} of {len(order)} checked)"
        if clear:
            text += f"; not affected: {', '.join(runs(order, clear))}"
        if absent:
            text += f"; not provided: {', '.join(runs(order, absent))}"
        untried = [r for r, e in (indexes.get(adapter, {}).get("releases") or {}).items()
                   if e.get("status") not in ("checked", "outside-range")]
        if untried:
            text += f"; not checked here: {', '.join(untried)}"
        parts.append(text)
    profiles = sorted({f"{r.get('profile')}" for adapter in by_adapter for r in history.get(adapter, [])})
    return f"{PREFIX} (docs/matrix-history, profile {', '.join(profiles) or 'none'}): " + "; ".join(parts)


def rewrite(text: str, history: dict[str, list[dict]], indexes: dict[str, dict] | None = None) -> str:
    """``text`` (docs/bugs-found.md) with every numbered entry's "Affected releases" line written from the history:
    a paragraph of its own after the entry's ``Version:`` line (else its last ``Cells:`` line)."""
    explanations = bugs_found.explanations(text)
    lines, old = [], text.split("\n")
    for i, l in enumerate(old):  # the previous generated lines go, with the blank line before each
        if l.startswith(PREFIX + " ("):
            if lines and lines[-1] == "":
                lines.pop()
            continue
        lines.append(l)
    starts = [i for i, l in enumerate(lines) if l.startswith("## ")] + [len(lines)]
    out = lines[:starts[0]]
    for begin, end in zip(starts, starts[1:]):
        section = lines[begin:end]
        heading = section[0][3:].strip()
        mine = [x for x in explanations if x.heading == heading and x.defect]
        anchors = [j for j, l in enumerate(section) if l.startswith("Version:")] or \
                  [j for j, l in enumerate(section) if l.startswith(bugs_found.PREFIX)]
        if mine and anchors:
            j = anchors[0] + 1
            section = section[:j] + ["", line(mine, history, indexes)] + section[j:]
        out += section
    return "\n".join(out)


def run(args) -> int:
    from . import history as history_mod
    from .releases import load_indexes

    path = Path(args.affected)
    folder = Path(args.out) / history_mod.FOLDER
    try:
        text = path.read_text(encoding="utf-8")
        history = {a: history_mod.series(r) for a, r in history_mod.load(folder).items()}
        new = rewrite(text, history, load_indexes(folder))
    except (OSError, ValueError) as exc:
        print(f"rlspec: --affected {path}: {exc}", file=sys.stderr)
        return 2
    if new != text:
        path.write_text(new, encoding="utf-8")
    count = sum(1 for l in new.splitlines() if l.startswith(PREFIX + " ("))
    print(f"{path}: {count} entries' affected releases from {folder} ({'rewritten' if new != text else 'unchanged'})")
    return 0

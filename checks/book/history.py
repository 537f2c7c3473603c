"""The conformance matrix kept per library version: the history of verdicts the book shows.

Layout (one file per adapter and library version, so a new release adds a file and never rewrites
another's)::

    docs/matrix-history/
        sb3/stable-baselines3_2.9.2.json
        torchrl/torchrl_0.14.1_tensordict_0.14.3.json
        ...

Each file is ``{"schema": 1, "adapter", "version", "rlspec", "profile", "seed", "recorded",
"report"}`` where ``report`` is the adapter's entry of the merged matrix JSON exactly as
``rlspec matrix`` wrote it (every candidate column, variant columns included, with its run) and
``version`` is the version string of its main column (``"torchrl 0.14.1, tensordict 0.14.3"``).
``recorded`` is the date the verdicts were first recorded for that version; re-running the matrix
on the same version replaces the verdicts (the latest run of a version is its record) and keeps the
date unless the verdicts changed.

``rlspec matrix`` calls :func:`record` after it writes ``conformance.json``; the book reads the
history back with :func:`load` and orders each adapter's versions by :func:`version_key`.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

SCHEMA = 1
FOLDER = "matrix-history"  # beside conformance.json


def slug(version: str) -> str:
    """A file name for a version string: ``"torchrl 0.14.1, tensordict 0.14.3"`` -> ``torchrl_0.14.1_tensordict_0.14.3``."""
    text = re.sub(r"[^A-Za-z0-9.+-]+", "_", version).strip("_.")
    return text or "unknown"


def version_key(version: str) -> tuple:
    """Orders versions numerically where they are numbers (``2.10.0`` after ``2.9.2``)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[^A-Za-z0-9]+|(?<=\d)(?=[A-Za-z])|(?<=[A-Za-z])(?=\d)", version) if p)


def _verdicts(report: dict) -> list:
    """What a record says, without timings: the part whose change makes a new ``recorded`` date."""
    return [(c["candidate"], c.get("version"), [(r["id"], r["status"], r.get("message", ""), r.get("counterexample", ""))
                                              for r in c["run"]["clauses"]]) for c in report.get("candidates", [])]


def record(matrix: dict, folder: Path, today: str | None = None) -> list[Path]:
    """Write one history file per available adapter of the merged ``matrix`` into ``folder``; the paths written."""
    folder = Path(folder)
    today = today or datetime.date.today().isoformat()
    written = []
    for report in matrix.get("adapters", []):
        candidates = report.get("candidates") or []
        if not report.get("available") or not candidates:
            continue  # nothing was checked: no verdicts to keep
        version = str(candidates[0].get("version") or "unknown")
        path = folder / report["adapter"] / f"{slug(version)}.json"
        recorded = today
        if path.is_file():
            try:
                previous = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                previous = {}
            if _verdicts(previous.get("report", {})) == _verdicts(report):
                recorded = previous.get("recorded", today)
                if previous.get("report") == report:
                    continue  # unchanged: leave the file (and its bytes) alone
        entry = {"schema": SCHEMA, "adapter": report["adapter"], "version": version, "rlspec": matrix.get("rlspec"),
                 "profile": matrix.get("profile"), "seed": matrix.get("seed"), "recorded": recorded, "report": report}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(entry, indent=1) + "\n", encoding="utf-8")
        written.append(path)
    return written


class HistoryError(ValueError):
    """A history file that is not one :func:`record` writes."""


def load(folder: Path) -> dict[str, list[dict]]:
    """adapter -> its records, oldest version first (``{}`` when there is no history folder)."""
    folder = Path(folder)
    found: dict[str, list[dict]] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*/*.json")):
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise HistoryError(f"{path}: not JSON ({exc})") from None
        if not isinstance(entry, dict) or entry.get("schema") != SCHEMA or "report" not in entry or "version" not in entry:
            raise HistoryError(f"{path}: not a matrix history record (schema {SCHEMA}: adapter, version, report)")
        found.setdefault(entry["adapter"], []).append(entry)
    for records in found.values():
        records.sort(key=lambda e: (version_key(e["version"]), e.get("recorded", "")))
    return found

"""The conformance matrix kept per library version: the history of verdicts the book shows.

Layout (one file per adapter and library version, so a new release adds a file and never rewrites
another's)::

    docs/matrix-history/
        sb3/stable-baselines3_2.9.2.json
        torchrl/torchrl_0.14.1_tensordict_0.14.3.json
        ...

Each file is ``{"schema": 1, "adapter", "version", "rlspec", "profile", "seed", "recorded",
"report"}`` (and, when known, ``"commit"``: rlspec's commit; from ``rlspec matrix --releases``, ``"release"``:
the library release installed and ``"environment"``: the versions of what was installed beside it) where
``report`` is the adapter's entry of the merged matrix JSON exactly as ``rlspec matrix`` wrote it (every
candidate column, variant columns included, with its run) and ``version`` is the version string of its main
column (``"torchrl 0.14.1, tensordict 0.14.3"``). ``recorded`` is the date the verdicts were first recorded
for that version; re-running the matrix on the same version replaces the verdicts (the latest run of a
version is its record) and keeps the date unless the verdicts changed. A run at another profile or seed than
the matrix's (ci, 0) is kept beside it under its own name (:func:`record_name`).

Each adapter's folder also holds ``releases.json`` (:mod:`rlspec.checks.matrix.releases`): its declared release
range and every release tried, checked or not (not installable here, outside the range), with the reason
and the install and run times.

``rlspec matrix`` calls :func:`record` after it writes ``conformance.json``, ``rlspec matrix --releases``
:func:`write_record` per release; the book reads the history back with :func:`load` and orders each
adapter's versions by :func:`version_key`.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

SCHEMA = 1
FOLDER = "matrix-history"  # beside conformance.json
INDEX = "releases.json"  # each adapter's index of the releases tried (rlspec.checks.matrix.releases writes it)


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


def record_name(version: str, profile: str | None = "ci", seed: int | None = 0) -> str:
    """The record's file name: ``slug(version).json`` for the matrix's own profile and seed (ci, 0), else with
    them as a suffix (``stable-baselines3_2.9.2~quick-seed3.json``), so a run at another profile or seed never
    replaces the canonical record."""
    if (profile, seed) in (("ci", 0), (None, None)):
        return f"{slug(version)}.json"
    return f"{slug(version)}~{profile}-seed{seed}.json"


def write_record(folder: Path, report: dict, *, rlspec=None, profile="ci", seed=0, commit=None, today: str | None = None,
                 extra: dict | None = None) -> Path | None:
    """Write one adapter's report (an entry of the merged matrix's ``adapters``) as the record of its version; the
    path, or None when the file already holds exactly this (its bytes are left alone)."""
    candidates = report.get("candidates") or []
    if not report.get("available") or not candidates:
        return None  # nothing was checked: no verdicts to keep
    today = today or datetime.date.today().isoformat()
    version = str(candidates[0].get("version") or "unknown")
    path = Path(folder) / report["adapter"] / record_name(version, profile, seed)
    recorded = today
    report = {k: v for k, v in report.items() if k != "python"}  # where the interpreter was is not a verdict
    if path.is_file():
        try:
            previous = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            previous = {}
        if _verdicts(previous.get("report", {})) == _verdicts(report):
            recorded = previous.get("recorded", today)
            if previous.get("report") == report and all(previous.get(k) == v for k, v in (extra or {}).items()):
                return None  # unchanged: leave the file (and its bytes) alone
    entry = {"schema": SCHEMA, "adapter": report["adapter"], "version": version, "rlspec": rlspec,
             "profile": profile, "seed": seed, "recorded": recorded}
    if commit:
        entry["commit"] = commit
    entry.update(extra or {})
    entry["report"] = report
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entry, indent=1) + "\n", encoding="utf-8")
    return path


def record(matrix: dict, folder: Path, today: str | None = None) -> list[Path]:
    """Write one history file per available adapter of the merged ``matrix`` into ``folder``; the paths written."""
    written = []
    for report in matrix.get("adapters", []):
        path = write_record(folder, report, rlspec=matrix.get("rlspec"), profile=matrix.get("profile"),
                            seed=matrix.get("seed"), commit=matrix.get("commit"), today=today)
        if path is not None:
            written.append(path)
    return written


def series(records: list[dict]) -> list[dict]:
    """One run configuration's records out of an adapter's: those of the (profile, seed) most of them share, so the
    release history (``rlspec matrix --releases``, one record per release) wins over the matrix's single record of a
    latest release at another profile; a tie goes to the matrix's own (ci, 0). Oldest version first."""
    counts: dict = {}
    for r in records:
        key = (r.get("profile"), r.get("seed"))
        counts[key] = counts.get(key, 0) + 1
    if not counts:
        return []
    best = max(counts, key=lambda k: (counts[k], k == ("ci", 0)))
    return [r for r in records if (r.get("profile"), r.get("seed")) == best]


class HistoryError(ValueError):
    """A history file that is not one :func:`record` writes."""


def load(folder: Path, profile: str | None = None, seed: int | None = None) -> dict[str, list[dict]]:
    """adapter -> its records, oldest version first (``{}`` when there is no history folder); with ``profile`` and
    ``seed``, only the records of that run configuration."""
    folder = Path(folder)
    found: dict[str, list[dict]] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*/*.json")):
        if path.name == INDEX:
            continue  # the adapter's index of releases (rlspec.checks.matrix.releases), not a record
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise HistoryError(f"{path}: not JSON ({exc})") from None
        if not isinstance(entry, dict) or entry.get("schema") != SCHEMA or "report" not in entry or "version" not in entry:
            raise HistoryError(f"{path}: not a matrix history record (schema {SCHEMA}: adapter, version, report)")
        if profile is not None and (entry.get("profile"), entry.get("seed")) != (profile, seed):
            continue
        found.setdefault(entry["adapter"], []).append(entry)
    for records in found.values():
        records.sort(key=lambda e: (version_key(e["version"]), e.get("recorded", "")))
    return found

"""Count the causes rlspec prints as *likely*, before and after causes had to rest on evidence (issue 24).

    python benchmarks/causes.py [--mutants tests/mutants] [--precision tests/precision] [--only NAME-GLOB]

For every mutant of tests/mutants (a named mistake) and every float32-arithmetic variant of tests/precision
(correct math, lower precision), run the quick profile at seed 0 in this process, and for every failing clause
record two causes: the one printed now, and the one the old rule printed (the check's own text or the clause's
fixed likely cause, whatever the numbers said). Judged:

- a mutant's cause is *right* when it is the mutant's own mistake: for a cause from the known-mistake
  signatures, that mistake's text is this mutant's (or one with the same bug label); for a check's own
  diagnosis and for the old rule (fixed text), when the clause is one the mutant names as catching it
  (lenient: the fixed text of a clause written for this mistake is counted right);
- a precision variant's cause is *wrong* whenever one is printed (it has no algorithmic bug).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import runpy
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", default=str(ROOT / "tests" / "mutants"))
    parser.add_argument("--precision", default=str(ROOT / "tests" / "precision"))
    parser.add_argument("--only", default="*")
    parser.add_argument("--json", help="write every judged cause here")
    args = parser.parse_args()

    from rlspec.checks import signatures, verdict
    from rlspec.checks.engine import run_conformance

    seen = []
    original = verdict._evidence

    def recording(context, clause, failure):
        cause, known, features = original(context, clause, failure)
        seen.append({"clause": clause.id, "old": failure.cause or clause.likely_cause, "new": cause,
                     "diagnosed": bool(failure.diagnosed and cause == failure.cause), "known": known})
        return cause, known, features

    verdict._evidence = recording
    by_text: dict[str, set[str]] = {}
    for answers in signatures.catalogue().values():
        for a in answers:
            by_text.setdefault(a.cause, set()).update({a.name, a.bug})
    rows = []
    totals = {"mutants": 0, "failures": 0, "old printed": 0, "old wrong": 0, "new printed": 0, "new wrong": 0,
              "new right": 0, "new from signatures": 0, "new from diagnosis": 0, "precision lines": 0,
              "variants": 0, "variant failures": 0, "variant old algorithmic": 0, "variant new algorithmic": 0,
              "variant precision lines": 0}
    started = time.perf_counter()
    for kind, folder in (("mutant", Path(args.mutants)), ("variant", Path(args.precision))):
        for path in sorted(folder.glob("*.py")):
            if not fnmatch.fnmatch(path.stem, args.only):
                continue
            meta = runpy.run_path(str(path)).get("RLSPEC_MUTANT", {}) if kind == "mutant" else {}
            seen.clear()
            try:
                run_conformance(str(path), profile="quick", seed=0)
            except Exception as exc:  # noqa: BLE001 - a mutant the loader refuses is reported, not counted
                print(f"  {path.stem}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            declared = set(meta.get("clauses", ()))
            own = {path.stem, meta.get("bug", "")}
            for entry in seen:
                entry.update(kind=kind, candidate=path.stem)
                precision = any(k.startswith("precision:") for k in entry["known"])
                if kind == "mutant":
                    totals["failures"] += 1
                    totals["old printed"] += bool(entry["old"])
                    old_wrong = bool(entry["old"]) and entry["clause"] not in declared
                    totals["old wrong"] += old_wrong
                    new_wrong = False
                    if entry["new"]:
                        totals["new printed"] += 1
                        if entry["diagnosed"]:
                            totals["new from diagnosis"] += 1
                            new_wrong = entry["clause"] not in declared
                        else:
                            totals["new from signatures"] += 1
                            new_wrong = not (by_text.get(entry["new"], set()) & own)
                        totals["new wrong" if new_wrong else "new right"] += 1
                    totals["precision lines"] += precision
                    entry.update(old_wrong=old_wrong, new_wrong=new_wrong)
                else:
                    totals["variant failures"] += 1
                    totals["variant old algorithmic"] += bool(entry["old"])
                    totals["variant new algorithmic"] += bool(entry["new"])
                    totals["variant precision lines"] += precision
                rows.append(dict(entry))
            totals["mutants" if kind == "mutant" else "variants"] += 1
    verdict._evidence = original
    for row in rows:
        if row.get("new_wrong") or (row["kind"] == "variant" and row["new"]):
            print(f"  wrong: {row['candidate']} {row['clause']}: {row['new']}")
    print(json.dumps(totals, indent=1))
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

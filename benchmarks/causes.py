"""Count the causes rlspec prints as *likely*, before and after causes had to rest on evidence (issue 24).

    python benchmarks/causes.py [-n WORKERS] [--only NAME-GLOB] [--json ROWS.json] [--rows ROWS.json]

For every mutant of tests/mutants (a named mistake) and every float32-arithmetic variant of tests/precision
(correct math, lower precision), run the quick profile at seed 0 (``-n`` worker processes, each candidate
only on the clauses of the operations it provides; a candidate that takes more than ``--limit`` seconds is
reported and its worker replaced), and for every failing clause record two
causes: the one printed now, and the one the rule of f25727a printed (the check's own text or the clause's fixed
likely cause, always, whatever the numbers said). ``--rows`` judges a recorded run again without running it.

How a printed cause is judged (honestly: a cause is right only if it describes *this* mutant's bug):

- a cause from the known-mistake signatures is the first sentence of a mutant's docstring
  (checks/wrong_answers.json): right when that mutant is this one or has the same bug label;
- any other text (a check's own diagnosis, a clause's fixed likely cause) is looked up in
  ``benchmarks/causes.json``, a hand classification kept as data: each distinct text with the mutants whose
  bug it describes (by file stem). Right when this mutant is listed; wrong when the text is classified and this
  mutant is not; *no cause* when the text names none (a restatement of the failure); *unjudged* when the text is
  not classified yet (printed, and counted apart: classify it);
- a float32 variant has no algorithmic bug: any cause printed for it is wrong (a precision finding is not a cause).
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
CLASSIFIED = Path(__file__).with_name("causes.json")
CLAUSE_SECONDS = 120  # a clause's limit (the command line's quick profile: 30 s, isolated; this machine is shared)


def run_one(kind: str, path: str) -> tuple[dict, list[dict]]:
    """One candidate's failing clauses with both causes (in a process of its own)."""
    from rlspec.checks.runner import signatures, verdict
    from rlspec.checks.runner.engine import run_conformance
    from rlspec.checks.runner.loader import load
    from rlspec.spec import catalogue

    namespace = runpy.run_path(path)
    meta = namespace.get("RLSPEC_MUTANT", {}) if kind == "mutant" else {}
    doc = namespace.get("__doc__") or ""
    info = {"kind": kind, "candidate": Path(path).stem, "bug": meta.get("bug", ""),
            "clauses": list(meta.get("clauses", ())), "own cause": signatures.cause_of(doc) if kind == "mutant" else ""}
    rows: list[dict] = []
    original, explain = verdict._evidence, signatures.explain
    matched: list[str] = []

    def recording_explain(*args, **kwargs):
        cause, listed = explain(*args, **kwargs)
        matched.append(cause)
        return cause, listed

    def recording(context, clause, failure):
        matched.clear()
        cause, known, features = original(context, clause, failure)
        source = "signatures" if cause and matched and matched[-1] == cause else ("diagnosis" if cause else "")
        rows.append({"clause": clause.id, "old": failure.cause or clause.likely_cause, "new": cause,
                     "source": source, "known": known})
        return cause, known, features

    import signal

    from rlspec.checks.runner import engine

    clause_run = engine.run_clause

    def timed_clause(*args, **kwargs):
        """A clause over CLAUSE_SECONDS is an error, as an isolated run's time limit makes it (no cause either
        way): gae_mixture_without_tail's O(T K^2) loop never ends on the long float32 rollout."""
        def stop(signum, frame):
            raise TimeoutError(f"over {CLAUSE_SECONDS} s")

        previous = signal.signal(signal.SIGALRM, stop)
        signal.alarm(CLAUSE_SECONDS)
        try:
            return clause_run(*args, **kwargs)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)

    verdict._evidence, signatures.explain, engine.run_clause = recording, recording_explain, timed_clause
    try:
        provided = load(path)
        ids = [c.id for c in catalogue.clauses() if all(provided.provides(op) for op in c.operations)]
        if ids:
            run = run_conformance(provided, clauses=ids, profile="quick", seed=0)
            info["slowest"] = sorted(([r.id, round(r.seconds, 1)] for r in run.results), key=lambda x: -x[1])[:3]
    except Exception as exc:  # noqa: BLE001 - a candidate the loader refuses is reported, not counted
        info["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        verdict._evidence, signatures.explain, engine.run_clause = original, explain, clause_run
    return info, rows


def serve(folder: str) -> None:
    """A worker: run the candidates named on stdin (``INDEX KIND PATH`` lines), one at a time, each into
    ``folder/INDEX.json``, answering ``done INDEX`` (imports are paid once per worker, not per candidate)."""
    for line in sys.stdin:
        index, kind, path = line.rstrip("\n").split(" ", 2)
        info, rows = run_one(kind, path)
        Path(folder, f"{index}.json").write_text(json.dumps({**info, "rows": rows}), encoding="utf-8")
        print(f"done {index}", flush=True)


def run_all(jobs: list[tuple[str, str]], workers: int, limit: float) -> list[dict]:
    """Every candidate, on ``workers`` worker processes (:func:`serve`); a worker that spends more than ``limit``
    seconds on one candidate is killed (the candidate reported as timed out) and replaced."""
    import selectors
    import subprocess
    import tempfile

    results: dict[int, dict] = {}
    queue = list(enumerate(jobs))
    chooser = selectors.DefaultSelector()
    with tempfile.TemporaryDirectory() as folder:
        def start():
            process = subprocess.Popen([sys.executable, __file__, "--serve", folder], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
            return {"process": process, "job": None, "began": 0.0}

        def give(worker) -> None:
            index, (kind, path) = queue.pop(0)
            worker.update(job=index, began=time.perf_counter())
            worker["process"].stdin.write(f"{index} {kind} {path}\n")
            worker["process"].stdin.flush()

        def finish(index: int, info: dict, seconds: float) -> None:
            info["seconds"] = round(seconds, 1)
            results[index] = info
            print(f"  [{len(results)}/{len(jobs)}] {info['candidate']}: {len(info.get('rows', []))} failing, "
                  f"{seconds:.0f} s {info.get('slowest', '')} {info.get('error', '')}", file=sys.stderr, flush=True)

        pool = [start() for _ in range(min(workers, len(jobs)))]
        for worker in pool:
            chooser.register(worker["process"].stdout, selectors.EVENT_READ, worker)
            if queue:
                give(worker)
        while len(results) < len(jobs):
            for key, _ in chooser.select(timeout=1.0):
                worker = key.data
                line = worker["process"].stdout.readline()
                index = worker["job"]
                if index is None:
                    continue
                seconds = time.perf_counter() - worker["began"]
                kind, path = jobs[index]
                out = Path(folder, f"{index}.json")
                if line.startswith("done") and out.exists():
                    finish(index, json.loads(out.read_text(encoding="utf-8")), seconds)
                else:  # the worker died: report the candidate, start another worker
                    finish(index, {"kind": kind, "candidate": Path(path).stem, "error": "the worker died"}, seconds)
                    chooser.unregister(worker["process"].stdout)
                    worker.update(start())
                    chooser.register(worker["process"].stdout, selectors.EVENT_READ, worker)
                worker["job"] = None
                if queue:
                    give(worker)
            for worker in pool:
                if worker["job"] is not None and time.perf_counter() - worker["began"] > limit:
                    index = worker["job"]
                    kind, path = jobs[index]
                    chooser.unregister(worker["process"].stdout)
                    worker["process"].kill()
                    worker["process"].wait()
                    finish(index, {"kind": kind, "candidate": Path(path).stem, "error": f"timed out after {limit:g} s"},
                           limit)
                    worker.update(start(), job=None)
                    chooser.register(worker["process"].stdout, selectors.EVENT_READ, worker)
                    if queue:
                        give(worker)
        for worker in pool:
            worker["process"].stdin.close()
            worker["process"].wait()
    return [results[i] for i in sorted(results)]


def judge(candidates: list[dict], classified: dict[str, list[str]]) -> tuple[dict, list[str]]:
    """Totals and the lines to print (every wrong or unjudged cause, now and before)."""
    from rlspec.checks import signatures

    by_text: dict[str, set[str]] = {}
    for answers in signatures.catalogue().values():
        for a in answers:
            by_text.setdefault(a.cause, set()).update({a.name, a.bug})
    bugs = {c["candidate"]: c.get("bug", "") for c in candidates if c["kind"] == "mutant"}

    causes, no_cause = classified.get("causes", {}), set(classified.get("no cause", ()))

    def verdict_of(text: str, mutant: str, source: str) -> str:
        if source == "signatures" and text in by_text:
            return "right" if by_text[text] & {mutant, bugs.get(mutant, "")} else "wrong"
        if text in no_cause:
            return "no cause"
        if text not in causes:
            return "unjudged"
        return "right" if mutant in causes[text] else "wrong"

    totals = {key: 0 for key in (
        "mutants", "mutant failures", "before: printed", "before: right", "before: wrong", "before: no cause",
        "before: unjudged", "now: printed", "now: right", "now: wrong", "now: no cause", "now: unjudged",
        "now: from signatures", "now: from diagnosis",
        "now: precision findings", "variants", "variant failures", "variant before: algorithmic",
        "variant now: algorithmic", "variant now: precision findings")}
    lines = []
    for c in candidates:
        if c.get("error"):
            lines.append(f"  not run: {c['candidate']}: {c['error']}")
            continue
        mutant = c["kind"] == "mutant"
        totals["mutants" if mutant else "variants"] += 1
        for row in c["rows"]:
            precision = any(k.startswith("precision:") for k in row["known"])
            if not mutant:
                totals["variant failures"] += 1
                totals["variant before: algorithmic"] += bool(row["old"])
                totals["variant now: algorithmic"] += bool(row["new"])
                totals["variant now: precision findings"] += precision
                if row["new"]:
                    lines.append(f"  variant cause: {c['candidate']} {row['clause']}: {row['new']}")
                continue
            totals["mutant failures"] += 1
            totals["now: precision findings"] += precision
            if row["old"]:
                totals["before: printed"] += 1
                row["old verdict"] = verdict_of(row["old"], c["candidate"], "")
                totals[f"before: {row['old verdict']}"] += 1
            if row["new"]:
                totals["now: printed"] += 1
                totals[f"now: from {row['source']}"] += 1
                row["new verdict"] = verdict_of(row["new"], c["candidate"], row["source"])
                totals[f"now: {row['new verdict']}"] += 1
                if row["new verdict"] in ("wrong", "unjudged"):
                    lines.append(f"  {row['new verdict']} now: {c['candidate']} ({c['bug']}) {row['clause']} "
                                 f"[{row['source']}]: {row['new']}")
            if row.get("old verdict") == "unjudged":
                lines.append(f"  unjudged before: {c['candidate']} {row['clause']}: {row['old']}")
    return totals, lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", default=str(ROOT / "tests" / "mutants"))
    parser.add_argument("--precision", default=str(ROOT / "tests" / "precision"))
    parser.add_argument("--only", default="*", help="candidate file stems (a glob)")
    parser.add_argument("-n", "--workers", type=int, default=1, help="candidates run at a time")
    parser.add_argument("--json", help="write every candidate's failing clauses and their causes here")
    parser.add_argument("--rows", help="judge the candidates recorded by an earlier --json instead of running them")
    parser.add_argument("--limit", type=float, default=1800.0, help="seconds before a candidate's process is killed")
    parser.add_argument("--serve", metavar="FOLDER", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return 0

    classified = json.loads(CLASSIFIED.read_text(encoding="utf-8")) if CLASSIFIED.exists() else {}
    started = time.perf_counter()
    if args.rows:
        candidates = json.loads(Path(args.rows).read_text(encoding="utf-8"))
    else:
        jobs = [(kind, str(path)) for kind, folder in (("mutant", Path(args.mutants)), ("variant", Path(args.precision)))
                for path in sorted(folder.glob("*.py")) if fnmatch.fnmatch(path.stem, args.only)]
        candidates = run_all(jobs, args.workers, args.limit)
    totals, lines = judge(candidates, classified)
    print("\n".join(lines))
    print(json.dumps(totals, indent=1))
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(candidates, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

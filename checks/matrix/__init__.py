"""The conformance matrix: every built-in library adapter checked, merged into one table.

    rlspec matrix                                           # every adapter, in this interpreter
    rlspec matrix --python sb3=/tmp/venvs/sb3/bin/python --python skrl=/tmp/venvs/skrl/bin/python
    rlspec matrix --from-json docs/conformance.json         # re-render the documents, check nothing
    rlspec matrix --adapters skrl --update docs/conformance.json   # re-check one library, keep the rest

Libraries pin conflicting dependencies, so each adapter may run in an interpreter of its own
(``--python ADAPTER=PATH``, an environment where the library and rlspec are installed). For each
adapter the matrix starts ``PATH -m rlspec.checks.matrix ADAPTER``, which checks the adapter and
each of its ``VARIANTS`` (``adapter:variant`` candidates) with :func:`run_conformance` and prints
one JSON document; an adapter whose library is missing from that interpreter is reported as not
installed, with the import error, never silently dropped. Each candidate's description (listed
under the table) is a variant's docstring, or for the adapter itself its ``RLSPEC_NOTE`` (what
users must know about its coverage, e.g. operations the library removed).

The merged result is written as ``conformance.json`` (every verdict, message, counterexample,
version, convention, timing) and ``conformance.md`` (clauses x candidates: pass / FAIL / error /
xfail / - for not provided, each failure linked to its counterexample further down). The Markdown
is a pure function of the JSON (:func:`render`), free of timings, so regenerating it with the same
verdicts gives the same file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

from ...spec import contract

SCHEMA = 1
PACKAGE = f"{__package__.rpartition('.')[0]}.adapters"  # rlspec.checks.adapters
SYMBOLS = {"pass": "pass", "fail": "**FAIL**", "error": "**error**", "xfail": "xfail", "skip": "skip", "not-provided": "–"}


# ------------------------------------------------------------------------------------------------
# which adapters exist (without importing them: their libraries may be absent here)


def adapters() -> list[str]:
    """Names of the built-in library adapters: the public modules of ``rlspec.checks.adapters``, sorted."""
    import importlib.util
    import pkgutil

    package = importlib.util.find_spec(PACKAGE)
    names = [m.name for m in pkgutil.iter_modules(package.submodule_search_locations)]
    return sorted(n for n in names if not n.startswith("_"))


# ------------------------------------------------------------------------------------------------
# one adapter, in the interpreter that has its library (``python -m rlspec.checks.matrix NAME``)


def check_adapter(name: str, *, profile: str = "ci", seed: int = 0, workers: int = 1, clauses=None,
                  time_limit: float | None = None) -> dict:
    """Check adapter ``name`` and each of its VARIANTS here (``clauses``: a selection, for tests);
    a JSON-ready dict."""
    import importlib
    import platform
    import traceback

    from ..runner.engine import run_conformance
    from ..runner.loader import load

    from .releases import installed_outside

    report = {"adapter": name, "python": sys.executable, "python_version": platform.python_version()}
    started = time.perf_counter()
    outside = installed_outside(name)
    if outside:  # a release the adapter does not claim to drive: reported as such, never run, never failed
        return {**report, "available": False, "outside_range": True, "reason": outside, "candidates": []}
    try:
        module = importlib.import_module(f"{PACKAGE}.{name}")
    except Exception as exc:  # noqa: BLE001 - any import failure means "not installed here"
        lines = traceback.format_exception_only(type(exc), exc)
        return {**report, "available": False, "reason": lines[-1].strip(), "candidates": []}
    specs = [name] + [f"{name}:{variant}" for variant in getattr(module, "VARIANTS", ())]
    candidates = []
    for spec in specs:
        candidate = load(spec)
        run = run_conformance(spec, clauses=clauses, profile=profile, seed=seed, isolate=True, workers=workers,
                              time_limit=time_limit)
        # a variant is described by its docstring, the adapter itself by RLSPEC_NOTE (what users must know
        # about its coverage, e.g. operations the library removed), if it declares one
        variant_doc = (getattr(getattr(module, spec.partition(":")[2], None), "__doc__", "") or "") if ":" in spec \
            else str(getattr(module, "RLSPEC_NOTE", "") or "")
        candidates.append({
            "candidate": spec,
            "adapter": name,
            "variant": spec.partition(":")[2] or None,
            "description": " ".join(variant_doc.split()),
            "version": candidate.version,
            "conventions": contract.plain(candidate.conventions),
            "xfail": candidate.xfail,
            "run": run.to_json(),
        })
    return {**report, "available": True, "seconds": round(time.perf_counter() - started, 1), "candidates": candidates}


def _run_elsewhere(name: str, python: str, profile: str, seed: int, time_limit: float | None = None) -> dict:
    """``python -m rlspec.checks.matrix name`` in another interpreter; its JSON document (written
    to a file: a library may print to stdout while it imports)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rlspec-matrix-") as tmp:
        target = Path(tmp) / f"{name}.json"
        command = [python, "-m", "rlspec.checks.matrix", name, "--profile", profile, "--seed", str(seed), "--json", str(target)]
        if time_limit is not None:
            command += ["--time-limit", str(time_limit)]
        started = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as exc:
            reason = f"cannot run {python}: {exc}"
            return {"adapter": name, "python": python, "available": False, "reason": reason, "candidates": []}
        if done.returncode != 0 or not target.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
            return {"adapter": name, "python": python, "available": False,
                    "reason": f"{' '.join(command[:3])} {name} failed: {tail[0]}", "candidates": []}
        report = json.loads(target.read_text(encoding="utf-8"))
    report["seconds"] = round(time.perf_counter() - started, 1)  # including the interpreter's start
    return report


# ------------------------------------------------------------------------------------------------
# merge and render


def merge(reports: list[dict], *, profile: str, seed: int) -> dict:
    from ...spec import catalogue
    from ..runner.engine import VERSION
    from .releases import commit

    reports = sorted(reports, key=lambda r: r["adapter"])
    known = [c.id for c in catalogue.clauses()]
    seen = {c["id"] for r in reports for cand in r["candidates"] for c in cand["run"]["clauses"]}
    return {
        "schema": SCHEMA,
        "rlspec": VERSION,
        "commit": commit(),
        "date": datetime.date.today().isoformat(),
        "profile": profile,
        "seed": seed,
        "clauses": [c for c in known if c in seen] + sorted(seen - set(known)),
        "chapters": {c.id: c.chapter for c in catalogue.clauses()},
        "adapters": reports,
    }


def _anchor(candidate: str, clause_id: str) -> str:
    return f"{candidate.replace(':', '-')}-{clause_id}".lower()


def _cell(candidate: str, result: dict | None) -> str:
    if result is None:
        return "·"
    symbol = SYMBOLS.get(result["status"], result["status"])
    if result["status"] in ("fail", "error", "xfail"):
        return f"[{symbol}](#{_anchor(candidate, result['id'])})"
    return symbol


def _details(candidate: str, result: dict) -> list[str]:
    lines = [f'<a id="{_anchor(candidate, result["id"])}"></a>', "",
             f"#### {candidate} · {result['id']} · {result['status']}", ""]
    for note in result.get("notes", []):
        if note.startswith("declared deviation"):
            lines += [f"Declared deviation: {note.partition(': ')[2]}", ""]
    lines += ["```", result["message"]]
    if result.get("cause") and result["status"] == "fail":
        lines.append(f"likely cause: {result['cause']}")
    if result.get("call"):
        lines.append(f"call: {result['call']}")
    if result.get("counterexample"):
        lines.append(result["counterexample"])
    if result.get("replay"):
        lines.append(f"replay: {result['replay']}")
    lines += ["```", ""]
    return lines


def render(matrix: dict) -> str:
    """docs/conformance.md from the merged JSON (deterministic: no timings, no dates)."""
    candidates = [c for r in matrix["adapters"] for c in r["candidates"]]
    missing = [r for r in matrix["adapters"] if not r.get("available")]
    out = [
        "# Conformance matrix",
        "",
        f"Generated by `rlspec matrix` (rlspec {matrix['rlspec']}, profile `{matrix['profile']}`, seed "
        f"{matrix['seed']}) from [conformance.json](conformance.json); do not edit by hand. Reproduce with "
        "the command in the README (section *Real libraries*).",
        "",
        "Each column is a built-in adapter driving a library's real code (`rlspec check --candidate NAME`).",
        "**Judged as users run it:** a library's own column uses the library's defaults for everything the",
        "protocol does not pass (the protocol passes the inputs and hyperparameters: gamma, lambda, the clip",
        "range, coefficients, max_kl); a non-default setting or another code path is an `adapter:variant`",
        "column, described under the table. Each adapter's docstring names the library call behind every",
        "operation and every setting it passes ([adding-an-adapter.md](adding-an-adapter.md)).",
        "",
        "**FAIL**: the library's numbers contradict the clause; **error**: the library raised or returned",
        "something unusable; xfail: a deviation the adapter declares as a deliberate choice (reason below);",
        "–: the library has no such operation. Every FAIL, error and xfail links to its counterexample, and",
        "every FAIL and error is explained in [bugs-found.md](bugs-found.md): a defect with its smallest",
        "reproduction and upstream status, or a listed reason why it is not one (a test checks that none is",
        "left out).",
        "",
        "## Libraries",
        "",
        "| candidate | version | pass | FAIL | error | xfail | not provided |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in candidates:
        s = c["run"]["summary"]
        name = f"`{c['candidate']}`"
        out.append(f"| {name} | {c['version']} | {s.get('pass', 0)} | {s.get('fail', 0)} | {s.get('error', 0)} | "
                   f"{s.get('xfail', 0)} | {s.get('not-provided', 0) + s.get('skip', 0)} |")
    for r in missing:
        out.append(f"| `{r['adapter']}` | not installed: {r.get('reason', '')} | | | | | |")
    described = [c for c in candidates if c.get("description")]
    if described:
        out += [""] + [f"- `{c['candidate']}`: {c['description']}" for c in described]
    out += ["", "## Clauses", ""]
    header = "| clause | " + " | ".join(f"`{c['candidate']}`" for c in candidates) + " |"
    out += [header, "|---|" + "---|" * len(candidates)]
    by_candidate = [{r["id"]: r for r in c["run"]["clauses"]} for c in candidates]
    chapter = None
    for clause_id in matrix["clauses"]:
        this = matrix["chapters"].get(clause_id, "")
        if this != chapter:
            chapter = this
            out.append(f"| **{chapter or 'other'}** |" + " |" * len(candidates))
        cells = [_cell(c["candidate"], results.get(clause_id)) for c, results in zip(candidates, by_candidate)]
        out.append(f"| `{clause_id}` | " + " | ".join(cells) + " |")
    out += ["", "## Counterexamples and declared deviations", ""]
    for c, results in zip(candidates, by_candidate):
        shown = [results[i] for i in matrix["clauses"] if i in results and results[i]["status"] in ("fail", "error", "xfail")]
        if not shown:
            continue
        out += [f"### `{c['candidate']}` ({c['version']})", ""]
        for result in shown:
            out += _details(c["candidate"], result)
    conventions = [c for c in candidates if c.get("conventions") and not c.get("variant")]
    if conventions:
        out += ["## Declared conventions", ""]
        for c in conventions:
            pairs = ", ".join(f"`{k}` = `{json.dumps(v)}`" for k, v in c["conventions"].items())
            out += [f"- `{c['candidate']}`: {pairs}"]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def write(matrix: dict, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "conformance.json", out_dir / "conformance.md"
    json_path.write_text(json.dumps(matrix, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    md_path.write_text(render(matrix), encoding="utf-8")
    return json_path, md_path


# ------------------------------------------------------------------------------------------------
# command line


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``rlspec matrix`` (the CLI adds this subcommand)."""
    parser.description = ("Check the library adapters and write docs/conformance.md and .json (one release per library, "
                           "in the environments given with --python); with --releases, every release of each adapter's "
                           "declared range, each installed in an environment of its own, into docs/matrix-history; "
                           "`rlspec matrix merge SHARD.json ...` combines the reports of --shard runs.")
    parser.add_argument("action", nargs="?", choices=["merge"],
                        help="merge: combine the reports of `--releases ... --shard I/N --json FILE` runs into the history")
    parser.add_argument("reports", nargs="*", metavar="REPORT", help="with merge: the shards' JSON reports")
    parser.add_argument("--adapters", metavar="NAMES", help="comma-separated adapters (default: every built-in one)")
    parser.add_argument("--python", action="append", default=[], metavar="ADAPTER=PATH",
                        help="run this adapter in that interpreter (its own environment); repeatable")
    parser.add_argument("--profile", default="ci",
                        help="quick, ci (the default) or thorough; with --releases, several separated by commas")
    parser.add_argument("--seed", default="0", help="the seed (default 0); with --releases, several separated by commas")
    parser.add_argument("--time-limit", type=float, metavar="SECONDS",
                        help="per-clause limit before a library call is killed (default: the profile's: quick 30, ci 120); "
                             "on a busy machine a larger one keeps a slow call from reading as an error")
    parser.add_argument("-j", "--jobs", type=int, default=1,
                        help="adapters (with --releases: release environments) checked at the same time")
    parser.add_argument("--out", default="docs", metavar="DIR", help="where conformance.md and .json go (default docs)")
    parser.add_argument("--from-json", metavar="FILE", help="re-render the Markdown from this merged JSON; check nothing")
    parser.add_argument("--update", metavar="FILE",
                        help="keep the other adapters' results from this merged JSON; re-check only --adapters")
    parser.add_argument("--require", metavar="NAMES",
                        help="comma-separated adapters that must be installed: exit 2 if one is not")
    releases = parser.add_argument_group("the matrix across releases (docs/matrix-history; docs/releases.md)")
    releases.add_argument("--releases", metavar="SELECTION",
                          help="all (every release in each adapter's declared range), latest, or comma-separated "
                               "releases of one adapter's library; each is installed in an environment of its own")
    releases.add_argument("--shard", metavar="I/N", help="run the I-th of N deterministic slices of the "
                          "(adapter x release x profile x seed) cells; needs --json")
    releases.add_argument("--json", metavar="FILE", help="write the run's report (a shard's, or merge's result) here")
    releases.add_argument("--envs", metavar="DIR", help="where the release environments go (default: $TMPDIR/rlspec-release-envs)")
    releases.add_argument("--keep-envs", action="store_true", help="keep each release's environment (reused by a later run)")
    releases.add_argument("--base-python", metavar="PATH",
                          help="the interpreter the environments are made from (default: this one's base interpreter)")
    releases.add_argument("--list", action="store_true", help="print the cells (of the shard) and stop")
    releases.add_argument("--affected", metavar="BUGS_FOUND",
                          help="rewrite the 'Affected releases:' lines of this docs/bugs-found.md from the history in "
                               "--out/matrix-history, check nothing")


def run(args) -> int:
    from . import releases

    if args.action == "merge":
        return releases.run_merge(args)
    if args.affected:
        from . import affected

        return affected.run(args)
    if args.releases is None and (args.shard or args.list or args.json):
        print("rlspec: --shard, --list and --json belong to --releases", file=sys.stderr)
        return 2
    if args.releases is None:
        try:
            profiles, seeds = releases.profiles_of(args.profile), releases.seeds_of(args.seed)
        except releases.ReleasesError as exc:
            print(f"rlspec: {exc}", file=sys.stderr)
            return 2
        if len(profiles) > 1 or len(seeds) > 1:
            print("rlspec: several profiles or seeds need --releases (the matrix is one profile and one seed)", file=sys.stderr)
            return 2
        args.profile, args.seed = profiles[0], seeds[0]
    if args.from_json:
        matrix = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "conformance.md").write_text(render(matrix), encoding="utf-8")
        print(f"wrote {Path(args.out) / 'conformance.md'}")
        _record_history(matrix, Path(args.out))
        return 0
    every = adapters()
    chosen = [n.strip() for n in args.adapters.split(",") if n.strip()] if args.adapters else every
    unknown = sorted(set(chosen) - set(every))
    pythons = {}
    for item in args.python:
        name, sep, path = item.partition("=")
        if not sep or not path:
            print(f"rlspec: --python takes ADAPTER=PATH, not {item!r}", file=sys.stderr)
            return 2
        pythons[name.strip()] = path
    unknown += sorted(set(pythons) - set(every))
    if unknown:
        print(f"rlspec: no built-in adapter {', '.join(unknown)} (have: {', '.join(every)})", file=sys.stderr)
        return 2
    if args.releases is not None:
        if pythons:
            print("rlspec: --releases makes an environment per release; --python does not apply", file=sys.stderr)
            return 2
        return releases.run(args, chosen)

    def one(name: str) -> dict:
        started = time.perf_counter()
        print(f"matrix: {name} ...", flush=True)
        report = _run_elsewhere(name, pythons.get(name, sys.executable), args.profile, args.seed, args.time_limit)
        state = ("outside its range: " if report.get("outside_range") else "not installed: ") + report.get("reason", "") \
            if not report.get("available") else ", ".join(
            f"{c['candidate']} {_counts(c['run']['summary'])}" for c in report["candidates"])
        print(f"matrix: {name} done in {time.perf_counter() - started:.0f} s: {state}", flush=True)
        return report

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        reports = list(pool.map(one, chosen))
    if args.update:
        previous = json.loads(Path(args.update).read_text(encoding="utf-8"))
        if (previous["profile"], previous["seed"]) != (args.profile, args.seed):
            print(f"rlspec: {args.update} is profile {previous['profile']} seed {previous['seed']}; "
                  f"this run is profile {args.profile} seed {args.seed}", file=sys.stderr)
            return 2
        reports += [r for r in previous["adapters"] if r["adapter"] not in chosen]
    matrix = merge(reports, profile=args.profile, seed=args.seed)
    json_path, md_path = write(matrix, Path(args.out))
    print(f"wrote {md_path} and {json_path}")
    _record_history(matrix, Path(args.out))
    required = {n.strip() for n in (args.require or "").split(",") if n.strip()}
    absent = sorted(r["adapter"] for r in reports if r["adapter"] in required and not r.get("available"))
    if absent:
        print(f"rlspec: required adapters not installed: {', '.join(absent)}", file=sys.stderr)
        return 2
    return 0


def _record_history(matrix: dict, out_dir: Path) -> None:
    """Keep each library version's verdicts beside the matrix (OUT/matrix-history/ADAPTER/VERSION.json): the
    history the book (``rlspec book``) shows. A version already recorded is replaced by this run's verdicts."""
    from . import history

    written = history.record(matrix, out_dir / history.FOLDER)
    if written:
        print(f"wrote {len(written)} history file(s) in {out_dir / history.FOLDER}")


def _counts(summary: dict) -> str:
    return "(" + ", ".join(f"{n} {s}" for s, n in summary.items() if n) + ")"


def main(argv: list[str] | None = None) -> int:
    """``python -m rlspec.checks.matrix ADAPTER --json PATH``: check one adapter here, write its JSON."""
    parser = argparse.ArgumentParser(prog="python -m rlspec.checks.matrix")
    parser.add_argument("adapter")
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", required=True, metavar="PATH")
    parser.add_argument("--time-limit", type=float, default=None)
    args = parser.parse_args(argv)
    from ..runner.verdict import import_hypothesis_without_plugins

    import_hypothesis_without_plugins()  # as `rlspec check` does: a cell's draws do not depend on the environment's plugins
    report = check_adapter(args.adapter, profile=args.profile, seed=args.seed, time_limit=args.time_limit)
    Path(args.json).write_text(json.dumps(report) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through subprocesses
    sys.exit(main())

"""The ``rlspec book`` subcommand (arguments and run); the command line adds it like ``rlspec matrix``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = """Write the auditor's book and the implementations dashboard into OUT/: a static site that needs no
network to read (open OUT/index.html). It is built from an rlspec checkout, like `rlspec vectors`: the
mutant catalogue (tests/mutants), the vector set (vectors/), the matrix (docs/conformance.json), its history
(docs/matrix-history) and docs/bugs-found.md. The proofs are re-derived and the figures redrawn from the
reference on every build."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = HELP
    parser.add_argument("out", metavar="OUT", help="folder for the site (created; a book written before is replaced)")
    parser.add_argument("--matrix", metavar="FILE", help="the merged matrix JSON (default: docs/conformance.json of this checkout)")
    parser.add_argument("--history", metavar="DIR",
                        help="the verdicts per library version (default: docs/matrix-history; rlspec matrix writes it)")
    parser.add_argument("--bugs-found", metavar="FILE", help="the defects the matrix found (default: docs/bugs-found.md)")
    parser.add_argument("--json", metavar="RUN", action="append", default=[],
                        help="add a candidate's `rlspec check --json` report as a column; repeatable")
    parser.add_argument("--studies", metavar="DIR", help="embed the studies' figures (rlspec study all --out DIR) on their chapters")
    parser.add_argument("--mutants", metavar="DIR", help="the mutant catalogue (default: tests/mutants of this checkout)")
    parser.add_argument("--no-mutants", action="store_true", help="build without the mutant catalogue (outside a checkout)")
    parser.add_argument("--no-figures", action="store_true", help="skip drawing the figures (they need matplotlib)")
    parser.add_argument("-j", "--jobs", type=int, metavar="N", help="processes deriving the proofs (default: one per CPU, at most 4)")


def _path(given: str | None, default: Path, flag: str) -> Path | None:
    """A path given on the command line must exist; the checkout's default may be absent (built without it)."""
    if given is None:
        return default if default.exists() else None
    if not Path(given).exists():
        raise FileNotFoundError(f"{flag} {given}: no such file or folder")
    return Path(given)


def run(args) -> int:
    from . import build as b
    from .collect import BookError

    if args.jobs is not None and args.jobs < 1:
        print("rlspec: --jobs must be at least 1", file=sys.stderr)
        return 2
    if args.no_mutants and args.mutants:
        print("rlspec: --mutants and --no-mutants exclude each other", file=sys.stderr)
        return 2
    try:
        matrix = _path(args.matrix, b.DEFAULT_MATRIX, "--matrix")
        history = _path(args.history, b.DEFAULT_HISTORY, "--history")
        bugs_found = _path(args.bugs_found, b.DEFAULT_BUGS_FOUND, "--bugs-found")
        for run_json in args.json:
            _path(run_json, Path(run_json), "--json")
        mutants = None if args.no_mutants else Path(args.mutants) if args.mutants else b.DEFAULT_MUTANTS
        summary = b.build(Path(args.out), matrix=matrix, history=history, bugs_found=bugs_found, runs=args.json,
                          mutants=mutants, studies=Path(args.studies) if args.studies else None,
                          figures=not args.no_figures, jobs=args.jobs, progress=lambda text: print(f"  {text}", flush=True))
    except (BookError, FileNotFoundError) as exc:
        print(f"rlspec: {exc}", file=sys.stderr)
        return 2
    bad = {p: v for p, v in summary.proofs.items() if v != "proved"}
    print(f"wrote {summary.pages} pages to {summary.out} in {summary.seconds:.1f} s: {len(summary.proofs) - len(bad)} of "
          f"{len(summary.proofs)} proofs proved, {summary.figures} figures, {summary.studies} studies")
    for proof_id, verdict in bad.items():
        print(f"  proof {proof_id}: {verdict}")
    if summary.unexplained:
        print(f"  {len(summary.unexplained)} FAIL verdicts have no entry in bugs-found.md (read from its {summary.bugs_found}): "
              + ", ".join(f"{c} {k}" for c, k in summary.unexplained[:6]) + (" ..." if len(summary.unexplained) > 6 else ""))
    for note in summary.notes:
        print(f"  {note}")
    print(f"open {summary.out / 'index.html'}")
    return 0 if summary.ok else 1

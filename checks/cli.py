"""The ``rlspec`` command line: check, list, explain, prove.

Exit codes: 0 conforms (declared deviations allowed), 1 a clause failed or errored (or a proof was
not proved), 2 bad arguments or a candidate that cannot be loaded (one line, no traceback unless
``--verbose``).
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

from ..spec import catalogue, contract

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


CHECK_EPILOG = """\
examples:
  rlspec check                                        the built-in reference (a smoke test of the install)
  rlspec check --candidate my_adapter.py              your adapter file (its folder is importable: from myrl import gae)
  rlspec check --candidate mypkg.rlspec_adapter --profile ci --require gae,ppo_clip_loss --junit junit.xml
  rlspec check --candidate my_adapter.py --only 'GAE-*,!GAE-FLOAT32-*' --json report.json
  rlspec check --candidate sb3                        a library through its built-in adapter (pip install "rlspec[sb3]")

[tool.rlspec] in pyproject.toml keeps these options (and RLSPEC_PRECISION / RLSPEC_CONVENTIONS) for a project;
the command line wins (docs/ci.md).

exit codes:
  0    every provided operation conforms (declared deviations allowed)
  1    a clause failed or errored (or, with --xfail-strict, an xfail entry passed)
  2    bad arguments or configuration, or a candidate that cannot be loaded, provides no operation, has a
       name near an operation's, or lacks a required one (one line; --verbose for the traceback)
  130  stopped by Ctrl-C; 143 by SIGTERM (the report so far, marked incomplete)
"""


class Parser(argparse.ArgumentParser):
    """argparse with a "did you mean" for a misspelt option (``--candiate``)."""

    def error(self, message):  # noqa: D102 - argparse's hook
        if message.startswith("unrecognized arguments:"):
            unknown = message.split(":", 1)[1].split()
            options = [o for action in self._all_actions() for o in action.option_strings]
            for word in unknown:
                if word.startswith("-"):
                    close = difflib.get_close_matches(word.split("=")[0], options, n=1, cutoff=0.6)
                    if close:
                        message = f"unknown option {word!r}; did you mean {close[0]!r}?"
                        break
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _all_actions(self):
        """This parser's actions and its subcommands' (unknown options surface at the top parser)."""
        for action in self._actions:
            yield action
            if isinstance(action, argparse._SubParsersAction):
                chosen = [p for name, p in action.choices.items() if name in _CHOSEN]
                for parser in chosen:
                    yield from parser._actions


_CHOSEN: list[str] = []  # the subcommand being parsed (main sets it), for the did-you-mean above


def _parser() -> argparse.ArgumentParser:
    from .runner.engine import PROFILES

    parser = Parser(prog="rlspec", description="Conformance suite for policy-gradient RL math.")
    parser.add_argument("--version", action="version", version="rlspec 0.1.0")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    check = commands.add_parser("check", help="check a candidate against the clause catalogue", epilog=CHECK_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Check a candidate's operations against every clause of the catalogue.")
    check.add_argument("--candidate", default=None, metavar="SPEC",
                       help="built-in name, dotted module (module:object allowed) or .py file (default: reference)")
    check.add_argument("--profile", default=None, choices=list(PROFILES),
                       help="; ".join(f"{p.name}: {p.description}" for p in PROFILES.values()) + " (default: quick)")
    check.add_argument("--only", metavar="PATTERN", help="comma-separated clause ids, globs (GAE-*), chapter names, "
                       "!PATTERN to exclude; every entry must match a clause")
    check.add_argument("--require", metavar="OPS", help="comma-separated operations the candidate must provide "
                       "(exit 2 if one is missing): a CI gate that notices an operation disappearing")
    check.add_argument("--dtype", default=None, choices=["float64", "float32"])
    check.add_argument("--device", default=None, help="cpu or cuda (torch candidates)")
    check.add_argument("--xfail", metavar="FILE", help="expected deviations: CLAUSE-ID  # reason, one per line")
    check.add_argument("--xfail-strict", action="store_true", default=None,
                       help="an xfail entry whose clause passes (XPASS) fails the run, as pytest's xfail_strict")
    check.add_argument("--json", metavar="PATH", help="write the JSON report here ('-' for stdout)")
    check.add_argument("--junit", metavar="PATH", help="write JUnit XML here")
    check.add_argument("--annotate", choices=["github", "none"], default=None,
                       help="github: GitHub Actions annotations for failures (the default when GITHUB_ACTIONS=true)")
    check.add_argument("--seed", type=int, default=None, help="seed for every drawn example (default 0)")
    check.add_argument("-n", "--workers", type=_workers, default=None, metavar="WORKERS",
                       help="run clauses on this many processes; 'auto' (the default): one per usable CPU core (at most 8)")
    check.add_argument("--time-limit", type=float, metavar="SECONDS",
                       help="per-clause limit before the candidate is killed, also for importing it (default: quick 30, ci 120, thorough 600; importing: at least 120)")
    check.add_argument("--memory-limit", type=int, metavar="MB", help="address-space cap per worker (default: RAM / (workers + 1))")
    check.add_argument("--no-isolation", action="store_true",
                       help="run the candidate in this process: faster start, but no time or memory limit")
    check.add_argument("--color", choices=["auto", "always", "never"], default=None,
                       help="colour the table (auto: on a terminal, unless NO_COLOR is set)")
    check.add_argument("--config", metavar="FILE", help="read [tool.rlspec] from this pyproject.toml (default: the "
                       "first one with that table from the working directory upwards)")
    check.add_argument("--verbose", action="store_true", help="every not-provided clause on its own row; tracebacks for load errors")
    check.add_argument("--vectors", metavar="DIR", help="run the candidate on a vector set (rlspec vectors) instead of the clauses")

    vectors = commands.add_parser("vectors", help="write the known-answer vector set (JSON, any language can run it)")
    vectors.add_argument("out", metavar="OUT", help="folder for the vector files (the repository keeps them in vectors/)")
    vectors.add_argument("--mutants", metavar="DIR", help="the mutant catalogue the flags come from (default: tests/mutants of this checkout)")

    listing = commands.add_parser("list", help="print the clause catalogue")
    listing.add_argument("--format", choices=["text", "json", "markdown", "chapters"], default="text",
                         help="chapters: the chapter file numbers, as docs/extending.md holds them (between its markers)")
    listing.add_argument("--bugs", action="store_true",
                         help="print the bug catalogue instead: each real bug, its upstream links and the clauses that catch it")

    contract_cmd = commands.add_parser("contract", help="the operations, conventions and declarations a candidate may use")
    contract_cmd.add_argument("--format", choices=["text", "json", "markdown", "readme"], default="text",
                              help="markdown: docs/contract.md; readme: the README's protocol table")

    explain = commands.add_parser("explain", help="statement, sources, proof, reference code and checks of a clause")
    explain.add_argument("clause")

    prove = commands.add_parser("prove", help="run the symbolic proofs and print each verdict")
    prove.add_argument("--only", metavar="PATTERN", help="glob over proof ids (e.g. 'gae.*')")
    prove.add_argument("-n", "--workers", type=_workers, default="auto", metavar="WORKERS",
                       help="prove on this many processes; 'auto' (the default): one per usable CPU core (at most 8)")

    figures = commands.add_parser("figures", help="write the clip-objective and GAE bias/variance figures (needs matplotlib)")
    figures.add_argument("out", metavar="OUT", help="folder for the PNG files")

    study = commands.add_parser("study", help="run one of the source chapter's experiments and check its claims (rlspec study --list)")
    study.add_argument("name", nargs="?", metavar="NAME", help="a study name (see --list), or 'all'")
    study.add_argument("--list", action="store_true", help="list the studies and what each checks")
    study.add_argument("--candidate", default="reference", metavar="SPEC", help="whose operations to study beside the reference's (default: reference)")
    study.add_argument("--seeds", type=int, metavar="N", help="replicates (default: the study's own, see --list)")
    study.add_argument("--out", metavar="DIR", help="write NAME.json and NAME.png here (needs matplotlib)")
    study.add_argument("--size", default="default", choices=["default", "small"], help="small: the tests' quick version")
    study.add_argument("--verbose", action="store_true", help="tracebacks for load errors")

    from . import matrix
    from .book import command as book

    matrix.configure(commands.add_parser("matrix", help="check every library adapter; write docs/conformance.md"))
    book.configure(commands.add_parser("book", help="write the auditor's book and the dashboard, a static site (from a checkout)"))
    return parser


AUTO_WORKERS_MAX = 8  # beyond this, starting workers costs more than the 104 clauses save


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _workers(text: str) -> int:
    """``-n``: a number, or ``auto`` for one worker per usable core (the affinity mask, not the machine's count)."""
    if text == "auto":
        return min(usable_cores(), AUTO_WORKERS_MAX)
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: a number or auto") from None


def run() -> None:
    """The ``rlspec`` console script: :func:`main`, then an exit without the interpreter's teardown.

    With torch loaded, Python's teardown (every module's objects freed one by one) costs about 0.4 s, a
    sixth of the import floor, after the run has ended and its report is written: a user waits for it on
    every command. The exit runs what the teardown would have run that matters (the ``atexit`` handlers,
    coverage's among them; the streams' buffers) and then ends the process. Where a thread that is not a
    daemon is still running, Python's own exit (which waits for it) is taken instead."""
    code = main()
    import atexit
    import threading

    run_exit_functions = getattr(atexit, "_run_exitfuncs", None)  # CPython's; elsewhere, Python's own exit
    if run_exit_functions is None or any(
            t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    run_exit_functions()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`rlspec list | head`) or a closed stream
            pass
    os._exit(code if isinstance(code, int) else 0)


DRAWING_COMMANDS = ("check", "vectors", "matrix", "study", "explain", "book", "figures")  # the ones that load the checks


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    words = list(sys.argv[1:] if argv is None else argv)
    _CHOSEN[:] = [w for w in words if not w.startswith("-")][:1]
    args = parser.parse_args(words)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command in DRAWING_COMMANDS:
        from .runner.verdict import import_hypothesis_without_plugins

        import_hypothesis_without_plugins()
    handler = {"check": cmd_check, "vectors": cmd_vectors, "list": cmd_list, "contract": cmd_contract, "explain": cmd_explain, "prove": cmd_prove, "figures": cmd_figures, "study": cmd_study, "matrix": cmd_matrix, "book": cmd_book}[args.command]
    try:
        return handler(args)
    except BrokenPipeError:  # `rlspec list | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


# ------------------------------------------------------------------------------------------------
# check


def _write(path: str, text: str, terminal) -> None:
    """Write a report (``-``: stdout). The path was validated before the run (:func:`output_problem`): no folder
    is created, nothing is written where the user did not say."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    Path(path).write_text(text, encoding="utf-8")


def output_problem(option: str, path: str | None) -> str | None:
    """Why ``path`` cannot take a report (one line), or None: checked before the run, so a bad path costs no
    run and leaves nothing behind (rlspec creates no folders)."""
    if path is None or path == "-":
        return None
    if not path.strip():
        return f"{option} needs a file path (or '-' for stdout)"
    target = Path(path)
    if target.is_dir():
        return f"{option} {path} is a folder; name a file in it (e.g. {target / ('report.json' if option == '--json' else 'junit.xml')})"
    folder = target.parent
    if not folder.is_dir():
        return f"{option} {path}: no folder {folder} (rlspec creates none; make it first)"
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        return f"{option} {path}: not writable"
    return None


def _on_sigterm():
    """SIGTERM (a CI job's cancel or timeout, ``kill``) ends the run as Ctrl-C does: the clauses that finished
    are reported, the report is marked incomplete, the workers are stopped. Returns the handler it replaced
    (None where no handler can be set: not the main thread)."""
    from .runner.engine import Terminated

    def terminate(signum, frame):
        raise Terminated(signum)

    try:
        return signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread
        return None


def _usage(message: str) -> int:
    print(f"rlspec: {message}", file=sys.stderr)
    return EXIT_USAGE


def _settings(args):
    """The command line over ``[tool.rlspec]`` over the defaults; returns (config, replay options) or raises
    ConfigError. Fills ``args`` in place."""
    from .runner import config as config_

    path = args.config if args.config else config_.find()
    if args.config and not Path(args.config).is_file():
        raise config_.ConfigError(f"--config {args.config}: no such file")
    config = config_.read(path)
    given = {k: getattr(args, k) is not None for k in ("xfail", "xfail_strict")}
    defaults = {"candidate": "reference", "profile": "quick", "seed": 0, "dtype": "float64", "device": "cpu",
                "color": "auto", "xfail_strict": False}
    for key in ("candidate", "profile", "seed", "dtype", "device", "only", "xfail", "xfail_strict", "json", "junit",
                "time_limit", "memory_limit", "color", "annotate"):
        if getattr(args, key) is None:
            setattr(args, key, config.get(key, defaults.get(key)))
    if args.workers is None and config.get("workers") is not None:
        value = config.get("workers")
        try:
            args.workers = _workers(str(value))
        except argparse.ArgumentTypeError as exc:
            raise config_.ConfigError(f"{config.path}: [tool.rlspec] workers: {exc}") from None
    require = [r.strip() for r in (args.require or "").split(",") if r.strip()] + list(config.get("require", []))
    args.require = require
    from .runner.engine import PROFILES

    if args.profile not in PROFILES:
        raise config_.ConfigError(f"{config.path}: [tool.rlspec] profile = {args.profile!r}; choose one of {', '.join(PROFILES)}")
    if args.dtype not in ("float64", "float32"):
        raise config_.ConfigError(f"{config.path}: [tool.rlspec] dtype = {args.dtype!r}; choose float64 or float32")
    if args.color not in ("auto", "always", "never") or args.annotate not in (None, "github", "none"):
        raise config_.ConfigError(f"{config.path}: [tool.rlspec] color takes auto, always or never; annotate github or none")
    replay = []
    if config.path is not None:
        replay += ["--config", str(config.path)]
    if given["xfail"] and isinstance(args.xfail, str):
        replay += ["--xfail", str(Path(args.xfail).resolve())]
    if given["xfail_strict"] and args.xfail_strict:
        replay += ["--xfail-strict"]
    if args.time_limit is not None:
        replay += ["--time-limit", f"{args.time_limit:g}"]
    if args.memory_limit is not None:
        replay += ["--memory-limit", str(args.memory_limit)]
    return config, replay


def cmd_check(args) -> int:
    from .runner import config as config_

    try:
        config, replay_extra = _settings(args)
    except config_.ConfigError as exc:
        return _usage(str(exc))
    if args.vectors:
        return cmd_check_vectors(args)
    if args.workers is None:  # the default: every usable core, unless the run is in this process
        args.workers = 1 if args.no_isolation else _workers("auto")
    from . import report
    from .runner.engine import UsageError, run_conformance
    from .runner.loader import LoadError, load

    if args.json == "-" and args.junit == "-":
        return _usage("--json - and --junit - both ask for stdout; send one of them to a file")
    for option, path in (("--json", args.json), ("--junit", args.junit)):
        problem = output_problem(option, path)
        if problem:
            return _usage(problem)
    terminal = sys.stderr if "-" in (args.json, args.junit) else sys.stdout
    if args.workers < 1:
        return _usage("-n WORKERS must be at least 1")
    if args.no_isolation and (args.workers > 1 or args.time_limit or args.memory_limit):
        return _usage("-n, --time-limit and --memory-limit need isolation (drop --no-isolation)")
    if (args.time_limit is not None and not args.time_limit > 0) or (args.memory_limit is not None and args.memory_limit <= 0):
        return _usage("--time-limit and --memory-limit must be positive")
    if args.time_limit is not None and args.time_limit == float("inf"):
        return _usage("--time-limit must be finite")
    if args.device not in ("cpu", "cuda") and not str(args.device).startswith("cuda:"):
        return _usage(f"unknown --device {args.device!r}; use cpu or cuda")
    style = report.Style.choose(args.color, terminal)
    annotate = args.annotate == "github" or (args.annotate is None and os.environ.get("GITHUB_ACTIONS") == "true")
    overrides = config.overrides
    if isinstance(args.xfail, dict):  # [tool.rlspec] xfail = {ID = "reason"}
        overrides["RLSPEC_XFAIL"] = args.xfail
        args.xfail = None
    try:
        from .runner.engine import select

        selected = select(args.only)
        # Isolated runs load the candidate in a worker (a hanging import is killed there).
        candidate = args.candidate if not args.no_isolation else load(args.candidate, device=args.device, overrides=overrides)
        if args.no_isolation:  # this process is rlspec's: settle what is loaded, as a worker does
            from .runner.chapters import load_all
            from .runner.worker import settle

            load_all()
            settle()
    except (LoadError, UsageError) as exc:
        if args.verbose:
            import traceback

            traceback.print_exc()
        return _usage(str(exc))

    started = []
    shown = report.Table(len(selected), style, fold=not args.verbose)

    def start(run=None):
        """The header goes out once the candidate has loaded, so a candidate that cannot load prints one line."""
        if not started:
            started.append(True)
            conventions = run.conventions if run is not None else None
            terminal.write(report.header(args.candidate, args.profile, args.seed, args.dtype, args.device, conventions) + "\n")

    def progress(result):
        start()
        line = shown.row(result)
        if line:
            terminal.write(line + "\n")
        terminal.flush()

    partial_json = args.json
    failed_checkpoint = []

    def checkpoint(run):
        """Rewrite the JSON report after every clause so an interrupted run leaves a valid one."""
        if partial_json and partial_json != "-" and not failed_checkpoint:
            try:
                _write(partial_json, run.dumps(), terminal)
            except OSError as exc:  # the disk filled, the folder went: say so once, finish the run
                failed_checkpoint.append(True)
                run.warnings.append(f"cannot write --json {partial_json}: {exc.strerror or exc}")

    previous = _on_sigterm()
    try:
        run = run_conformance(
            candidate,
            clauses=args.only,
            profile=args.profile,
            seed=args.seed,
            dtype=args.dtype,
            device=args.device,
            xfail=args.xfail,
            on_start=start,
            on_result=progress,
            on_checkpoint=checkpoint,
            isolate=not args.no_isolation,
            workers=args.workers,
            time_limit=args.time_limit,
            memory_limit=args.memory_limit * 2**20 if args.memory_limit else None,
            require=args.require,
            xfail_strict=bool(args.xfail_strict),
            overrides=overrides,
            replay_extra=replay_extra,
        )
    except (LoadError, UsageError) as exc:
        if args.verbose:
            import traceback

            traceback.print_exc()
        return _usage(str(exc))
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)

    start(run)
    folded = shown.folded()
    if folded:
        terminal.write(folded + "\n")
    report.write_terminal_footer(run, terminal, style)
    if annotate:
        sys.stdout.write(report.github_annotations(run, args.candidate))
        sys.stdout.flush()
    for option, path, text in (("--json", args.json, run.dumps), ("--junit", args.junit, lambda: report.junit(run))):
        if path:
            try:
                _write(path, text(), terminal)
            except OSError as exc:
                return _usage(f"cannot write {option} {path}: {exc.strerror or exc}")
    if run.incomplete:
        return 128 + (run.signal or signal.SIGINT)  # 130 after Ctrl-C, 143 after SIGTERM
    return EXIT_OK if run.ok else EXIT_FAIL


def cmd_check_vectors(args) -> int:
    """``rlspec check --vectors DIR``: the candidate on every case of a vector set, one line per case."""
    from . import vectors
    from .runner.loader import LoadError

    problem = output_problem("--json", args.json)
    if problem:
        return _usage(problem)
    if args.only or args.profile != "quick" or args.dtype != "float64" or args.xfail or args.junit or args.workers not in (None, 1):
        print("rlspec: --vectors runs every case as written; --only, --profile, --dtype, --xfail, --junit and -n do not "
              "apply", file=sys.stderr)
        return EXIT_USAGE
    terminal = sys.stderr if args.json == "-" else sys.stdout
    started = time.perf_counter()
    results: list = []

    def row(result):
        results.append(result)
        terminal.write(f"  {result.status:<13} {result.id:<64} {result.operation}\n")
        terminal.flush()

    previous = _on_sigterm()
    stopped = 0
    try:
        if args.no_isolation:
            from .runner.loader import load

            vectors.run(load(args.candidate), Path(args.vectors), on_result=row)
        else:
            vectors.run_isolated(args.candidate, Path(args.vectors), time_limit=args.time_limit or 30.0,
                                 load_limit=args.time_limit or 120.0, on_result=row)
    except (LoadError, vectors.VectorError) as exc:
        print(f"rlspec: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM (engine.Terminated): report what finished
        stopped = getattr(stop, "signum", signal.SIGINT)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "error", "skip", "not-provided")}
    for result in results:
        if result.status in ("fail", "error"):
            terminal.write(f"\n{result.id} ({result.operation}): {result.status}\n    {result.message}\n"
                           f"    clauses: {', '.join(result.clauses)}\n")
    seconds = time.perf_counter() - started
    terminal.write(f"{len(results)} vectors: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + f" in {seconds:.1f} s"
                   + (f" (interrupted by {signal.Signals(stopped).name})" if stopped else "") + "\n")
    if args.json:
        report = {"rlspec": "0.1.0", "candidate": args.candidate, "vectors": str(args.vectors), "format": vectors.FORMAT,
                  "version": vectors.VERSION, "cases": [r.to_json() for r in results], "summary": counts,
                  "seconds": round(seconds, 3)}
        if stopped:
            report["incomplete"] = True
        _write(args.json, json.dumps(report, indent=2) + "\n", terminal)
    if stopped:
        return 128 + stopped
    return EXIT_FAIL if counts["fail"] or counts["error"] else EXIT_OK


def cmd_vectors(args) -> int:
    from . import vectors

    folder = Path(args.mutants) if args.mutants else vectors.ROOT / "tests" / "mutants"
    if not folder.is_dir():
        print(f"rlspec: the flags come from the mutant catalogue; no folder {folder} (an rlspec checkout has tests/mutants; "
              "--mutants DIR)", file=sys.stderr)
        return EXIT_USAGE
    started = time.perf_counter()
    manifest = vectors.generate(Path(args.out), mutant_folder=folder, progress=lambda text: print(f"  {text}", flush=True))
    caught = sum(bool(m["caught_by"]) for m in manifest["mutants"].values())
    cases = sum(f["cases"] for f in manifest["files"])
    print(f"wrote {cases} vectors in {len(manifest['files'])} files to {args.out}: {caught} of {len(manifest['mutants'])} "
          f"mutants caught (manifest.json says why the others are not) in {time.perf_counter() - started:.1f} s")
    return EXIT_OK


def cmd_matrix(args) -> int:
    from . import matrix

    return matrix.run(args)


def cmd_book(args) -> int:
    from .book import command

    return command.run(args)


# ------------------------------------------------------------------------------------------------
# list, explain, prove


def _source_json(source) -> dict:
    return {**source.as_dict(), "cite": str(source), "url": source.url or getattr(source, "path", "")}


def _catalogue_json() -> list[dict]:
    from .runner.chapters import load_all

    registry = load_all()
    return [
        {
            "id": c.id,
            "chapter": c.chapter,
            "statement": c.statement,
            "sources": [_source_json(s) for s in c.sources],
            "operations": list(c.operations),
            "proofs": list(c.proofs),
            "checks": [k.qualified for k in registry.get(c.id, [])],
            "likely_cause": c.likely_cause,
            "bugs": list(c.bugs),
        }
        for c in catalogue.clauses()
    ]


def _bugs_json() -> list[dict]:
    cited = catalogue.catalogued_bugs_cited()
    return [
        {"id": b.id, "name": b.name, "library": b.library, "version": b.version, "mechanism": b.mechanism,
         "status": b.status, "fixed_in": b.fixed_in, "links": list(b.links), "code": b.code,
         "related": list(b.related), "clauses": list(cited[b.id])}
        for b in catalogue.bugs().values()
    ]


def _markdown_source(source) -> str:
    """One source as a Markdown line whose link a reader can follow from docs/."""
    if isinstance(source, catalogue.ProofSource):
        return f"rlspec proof `{source.proof}` ([{source.path}](../{source.path}))"
    if isinstance(source, catalogue.CodeSource):
        path = f"[`{source.path}`]({source.url})" if source.url else f"`{source.path}`"
        return f"{source.library} {source.version}, {path}: `{source.symbol}`"
    ref = source.reference
    where = f", {source.where}" if source.where else ""
    return f"[{ref.short}](#ref-{ref.key}), {ref.title}{where}"


def _bug_anchor(bug_id: str) -> str:
    return f"bug-{bug_id.lower()}"


def markdown_catalogue() -> str:
    """``docs/clauses.md``, generated from the catalogue (a test keeps the file in sync)."""
    lines = ["# Clause catalogue", "", "Generated by `rlspec list --format markdown`; do not edit by hand. "
             "Sources are published works (listed at the end), library code at the version read, or rlspec's own "
             "proofs; the bugs are in [known-bugs.md](known-bugs.md).", ""]
    cited: dict[str, None] = {}
    for chapter in catalogue.chapters():
        lines += [f"## {chapter.title}", ""]
        for c in chapter.clauses:
            lines.append(f"### `{c.id}`")
            lines.append("")
            lines.append(c.statement)
            lines.append("")
            lines.append(f"- operation: {', '.join(f'`{o}`' for o in c.operations)}")
            lines.append("- sources:")
            lines += [f"  - {_markdown_source(s)}" for s in c.sources]
            cited.update({s.reference.key: None for s in c.sources if isinstance(s, catalogue.PaperSource)})
            if c.proofs:
                lines.append(f"- proofs: {', '.join(f'`{p}`' for p in c.proofs)}")
            if c.likely_cause:
                lines.append(f"- a failure most often means: {c.likely_cause}")
            if c.bugs:
                lines.append("- catches: " + "; ".join(
                    f"[{b.id}](known-bugs.md#{_bug_anchor(b.id)}) {b.name}" for b in c.bug_entries))
            lines.append("")
    lines += ["## Works cited", ""]
    for key, ref in catalogue.references().items():
        if key in cited:
            ident = f"arXiv:{ref.arxiv}" if ref.arxiv else ref.url
            lines.append(f'- <a id="ref-{key}"></a>`{key}`: {ref.authors}, "{ref.title}", {ref.venue}, {ref.year}. '
                         f"[{ident}]({ref.link})")
    lines.append("")
    return "\n".join(lines)


def markdown_bugs() -> str:
    """``docs/known-bugs.md``, generated from spec/bugs.toml (a test keeps the file in sync)."""
    cited = catalogue.catalogued_bugs_cited()
    lines = ["# Known bugs", "", "Generated by `rlspec list --bugs --format markdown` from `spec/bugs.toml`; do not edit "
             "by hand. Real mistakes in public policy-gradient code, each with its upstream reports and the clauses "
             "built to catch it ([clauses.md](clauses.md)). Ids A-I were reported upstream; R entries are what "
             "rlspec's adapters found in the pinned libraries ([bugs-found.md](bugs-found.md) has the "
             "reproductions). Status: " + ", ".join(f"`{s}`" for s in catalogue.BUG_STATUSES) + ".", ""]
    lines += ["| id | name | library | status | caught by |", "|---|---|---|---|---|"]
    for b in catalogue.bugs().values():
        clauses_ = ", ".join(f"`{c}`" for c in cited[b.id]) or "no clause yet"
        library = f"{b.library} {b.version}".strip()
        lines.append(f"| [{b.id}](#{_bug_anchor(b.id)}) | {b.name} | {library} | {b.status} | {clauses_} |")
    lines.append("")
    for b in catalogue.bugs().values():
        lines += [f'### <a id="{_bug_anchor(b.id)}"></a>{b.id} `{b.name}`', ""]
        facts = [f"library: {b.library}" + (f" {b.version}" if b.version else ""), f"status: {b.status}"]
        if b.fixed_in:
            facts.append(f"fixed in {b.fixed_in}")
        lines.append("- " + "; ".join(facts))
        lines.append(f"- mechanism: {b.mechanism}")
        if b.code:
            lines.append(f"- code: `{b.code}`")
        if b.links:
            lines.append("- upstream: " + ", ".join(f"<{u}>" for u in b.links))
        elif b.found_by_rlspec:
            lines.append("- upstream: not reported; found by rlspec (see bugs-found.md)")
        if b.related:
            lines.append("- related: " + ", ".join(f"[{r}](#{_bug_anchor(r)})" for r in b.related))
        lines.append("- caught by: " + (", ".join(f"`{c}`" for c in cited[b.id]) or "no clause yet"))
        lines.append("")
    return "\n".join(lines)


CHAPTERS_BEGIN = "<!-- chapter numbers: generated by `rlspec list --format chapters`; do not edit by hand -->"
CHAPTERS_END = "<!-- end of the chapter numbers -->"


def markdown_chapters() -> str:
    """The chapter file numbers (``spec/clauses/NN_<chapter>.toml``) with each chapter's name and title, between
    the markers docs/extending.md holds them in (a test keeps that file in sync)."""
    files = sorted(catalogue.CLAUSE_DIR.glob("*.toml"))
    lines = [CHAPTERS_BEGIN, "", "| number | chapter | title |", "|---|---|---|"]
    for path, chapter in zip(files, catalogue.chapters(), strict=True):
        lines.append(f"| {path.stem.split('_', 1)[0]} | `{chapter.name}` | {chapter.title} |")
    return "\n".join(lines + ["", CHAPTERS_END]) + "\n"


def cmd_list(args) -> int:
    if args.format == "chapters":
        sys.stdout.write(markdown_chapters())
        return EXIT_OK
    if args.bugs:
        if args.format == "json":
            print(json.dumps(_bugs_json(), indent=2))
        elif args.format == "markdown":
            sys.stdout.write(markdown_bugs())
        else:
            cited = catalogue.catalogued_bugs_cited()
            for b in catalogue.bugs().values():
                print(f"  {b.id:<5} {b.name:<58} {b.status:<12} {', '.join(cited[b.id]) or '-'}")
        return EXIT_OK
    if args.format == "json":
        print(json.dumps(_catalogue_json(), indent=2))
    elif args.format == "markdown":
        sys.stdout.write(markdown_catalogue())
    else:
        for chapter in catalogue.chapters():
            print(f"{chapter.title} ({chapter.name})")
            for c in chapter.clauses:
                ops = ",".join(c.operations)
                print(f"  {c.id:<42} {ops:<14} {textwrap.shorten(c.statement, 90)}")
    return EXIT_OK


def cmd_contract(args) -> int:
    from .book import contract_docs

    if args.format == "json":
        print(json.dumps(contract_docs.as_json(), indent=2))
    elif args.format == "markdown":
        sys.stdout.write(contract_docs.markdown() + "\n")
    elif args.format == "readme":
        print(contract_docs.readme_table())
    else:
        print(contract_docs.text())
    return EXIT_OK


def cmd_explain(args) -> int:
    from .runner import reference_candidate
    from .runner.chapters import load_all
    from ..spec.proofs import PROOFS

    try:
        clause = catalogue.by_id(args.clause)
    except KeyError as exc:
        print(f"rlspec: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    wrap = lambda text, indent="  ": textwrap.fill(text, 96, initial_indent=indent, subsequent_indent=indent)
    out = [clause.id, "", wrap(clause.statement), "", f"chapter: {clause.chapter}",
           f"operation: {', '.join(clause.operations)}", "sources:"]
    for source in clause.sources:
        out.append(wrap(str(source)))
        if source.url:
            out.append(f"    {source.url}")
    if clause.likely_cause:
        out += ["likely cause of a failure:", wrap(clause.likely_cause)]
    if clause.bugs:
        out.append("real bugs it targets (spec/bugs.toml):")
        for bug in clause.bug_entries:
            out += [wrap(f"{bug}: {bug.mechanism}")]
            out += [f"    {url}" for url in bug.links] or ([f"    {bug.code}"] if bug.code else [])
    if clause.notes:
        out += ["notes:", wrap(clause.notes)]
    affecting = [k for k in contract.conventions().values() if clause.id in k.clauses]
    if affecting:
        out += ["conventions (RLSPEC_CONVENTIONS) that affect it:"]
        out += [wrap(f"{k.key}: {k.allowed_text()}; default {k.default!r}. {k.meaning}", "  ") for k in affecting]
    for proof_id in clause.proofs:
        proof = PROOFS[proof_id]
        verdict = proof()
        out += ["", f"proof {proof_id}: {verdict.status}", wrap(proof.statement), wrap("assumptions: " + proof.assumptions)]
        if verdict.counterexample:
            out.append(wrap("counterexample: " + verdict.counterexample))
    for op in clause.operations:
        function = getattr(reference_candidate, op, None)
        if function is not None:
            out += ["", f"reference {function.__module__}.{function.__name__}:", ""]
            out += ["  " + line for line in inspect.getsource(function).rstrip().splitlines()]
    checks = load_all().get(clause.id, [])
    out += ["", "checks:"] + [f"  {c.qualified}: {c.doc}" for c in checks]
    print("\n".join(out))
    return EXIT_OK


def _prove_one(proof_id: str) -> tuple[str, str, float]:
    """One proof's ``(status, counterexample, seconds)``: what a proof worker sends back (SymPy expressions
    stay in the worker)."""
    from ..spec.proofs import PROOFS

    t0 = time.perf_counter()
    verdict = PROOFS[proof_id]()
    return verdict.status, verdict.counterexample, time.perf_counter() - t0


def _proof_worker(parent: int) -> None:
    from .runner.lifetime import die_with_parent

    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops the pool


def _proved(ids: list[str], workers: int):
    """Each proof's verdict, in ``ids``' order. The proofs are independent SymPy computations: on Linux they
    run on ``workers`` forked processes (SymPy already imported, so a worker starts in milliseconds), each
    dying with this one; elsewhere, or for one proof, here."""
    import multiprocessing

    if workers <= 1 or len(ids) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield from map(_prove_one, ids)
        return
    pool = multiprocessing.get_context("fork").Pool(min(workers, len(ids)), _proof_worker, (os.getpid(),))
    try:
        yield from pool.imap(_prove_one, ids)  # chunks of one: the proofs' costs differ tenfold
    finally:
        pool.terminate()
        pool.join()


def cmd_prove(args) -> int:
    import fnmatch

    from ..spec.proofs import PROOFS, PROVED

    clauses_by_proof: dict[str, list[str]] = {}
    for c in catalogue.clauses():
        for p in c.proofs:
            clauses_by_proof.setdefault(p, []).append(c.id)
    chosen = [p.id for p in PROOFS.values() if not args.only or fnmatch.fnmatch(p.id, args.only)]
    if not chosen:
        print(f"rlspec: --only {args.only!r} matches no proof", file=sys.stderr)
        return EXIT_USAGE
    start = time.perf_counter()
    bad = 0
    for proof_id, (status, counterexample, seconds) in zip(chosen, _proved(chosen, args.workers)):
        used = ", ".join(clauses_by_proof.get(proof_id, [])) or "no clause"
        print(f"  {status:<13} {proof_id:<34} {seconds:5.2f}s  ({used})", flush=True)
        if status != PROVED:
            bad += 1
            print(f"      {counterexample}")
    print(f"{len(chosen)} proofs: {len(chosen) - bad} proved, {bad} not proved in {time.perf_counter() - start:.1f} s")
    return EXIT_OK if bad == 0 else EXIT_FAIL


def cmd_figures(args) -> int:
    try:
        from .book.figures import table_text, write_figures
    except ImportError as exc:  # pragma: no cover - matplotlib is the `figures` extra
        print(f"rlspec: figures need matplotlib ({exc}); pip install 'rlspec[figures]'", file=sys.stderr)
        return EXIT_USAGE

    paths, claims, rows = write_figures(args.out)
    print(table_text(rows))
    for claim, holds, numbers in claims:
        print(f"  {'holds' if holds else 'FAILS'}  {claim}: {numbers}")
    for path in paths:
        print(f"wrote {path}")
    return EXIT_OK if all(holds for _, holds, _ in claims) else EXIT_FAIL


def cmd_study(args) -> int:
    from . import studies
    from .runner.loader import LoadError, load

    if args.list:
        for module in studies.studies():
            print(f"{module.NAME:<20} {module.TITLE}")
            print(f"{'':<20} chapter {module.ILLUSTRATES['chapter']}; {module.SEEDS['default']} seeds; candidate operations: "
                  f"{', '.join(module.OPERATIONS) or 'none (exact dynamic programming)'}")
        return EXIT_OK
    if not args.name:
        print("rlspec: study needs a NAME or --list", file=sys.stderr)
        return EXIT_USAGE
    names = list(studies.NAMES) if args.name == "all" else [args.name]
    try:
        for name in names:
            studies.module(name)
        if args.seeds is not None and args.seeds < 1:
            raise studies.StudyError("--seeds must be at least 1")
        if args.out is not None:
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                raise studies.StudyError("--out needs matplotlib for the figures; pip install 'rlspec[figures]'") from None
        candidate = None if args.candidate == "reference" else load(args.candidate)
    except (LoadError, studies.StudyError) as exc:
        if args.verbose:
            import traceback

            traceback.print_exc()
        print(f"rlspec: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # exit 0: every study ran and its claims are what they are (a claim refuted on rlspec's gridworld, the reference's
    # run included, is a finding, not a failure); 1: the candidate's run breaks a claim that holds on the reference's;
    # 2: bad arguments, or a candidate that cannot be loaded or whose operation raised.
    differs, findings = [], []
    for name in names:
        started = time.perf_counter()
        try:
            result = studies.run(name, candidate, seeds=args.seeds, size=args.size, out=args.out)
        except studies.StudyError as exc:
            print(f"rlspec: {name}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(result.text())
        if args.out is not None:
            print(f"wrote {Path(args.out) / (name + '.json')} and {Path(args.out) / (name + '.png')}")
        judged = [c for c in result.claims if not c.id.startswith("reference:")]
        parts = [f"{sum(c.holds for c in judged)} of {len(judged)} claims hold"]
        if result.findings:
            parts.append(f"refuted on rlspec's gridworld (findings): {', '.join(c.id for c in result.findings)}")
        if result.differences:
            parts.append(f"the candidate breaks: {', '.join(c.id for c in result.differences)}")
        print(f"{name}: {'; '.join(parts)} ({time.perf_counter() - started:.1f} s)\n")
        differs += [f"{name}:{c.id}" for c in result.differences]
        findings += [f"{name}:{c.id}" for c in result.findings]
    if len(names) > 1:
        print(f"{len(names)} studies: {len(findings)} claims refuted (findings{': ' + ', '.join(findings) if findings else ''}); "
              f"{len(differs)} broken by the candidate{': ' + ', '.join(differs) if differs else ''}")
    return EXIT_FAIL if differs else EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    run()

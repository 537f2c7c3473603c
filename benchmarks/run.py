"""rlspec's speed, as ratios to the import floor measured in the same run.

    python benchmarks/run.py                 # the commands below, 3 interleaved rounds, medians
    python benchmarks/run.py --rounds 1      # what CI prints (.ci/run): one round
    python benchmarks/run.py --tests         # also the README's test command (minutes)
    python benchmarks/run.py --json out.json

A 2-core machine shared with other work gives noisy seconds; the ratio to the floor, measured in the same
round, is what to compare between changes (the targets are ratios: docs/speed.md). The commands run as a
user runs them, in fresh processes; the oracle's GAE is timed in this process (best of three calls).

Each chapter of the catalogue has a time budget: its clauses' seconds in ``rlspec check --no-isolation`` (the
quick profile, one process; read from that command's JSON report, every round), as a ratio to the floor,
against its share of what the ``check`` target leaves for clauses (see CHECK_TARGET). A new chapter gets its
budget from its clause count; one over budget is where to cut first.
Nothing here asserts: benchmarks report, tests never time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RLSPEC = [sys.executable, "-m", "rlspec.checks.cli"]
REPORT = Path(tempfile.mkdtemp(prefix="rlspec-bench-")) / "check.json"  # the in-process check's JSON report

# What the clauses of a quick `rlspec check` may cost in all, in one process, as a ratio to the floor: the check
# target (1.8x floor, issue 27) less the command's start (`check start` below: the same command on one clause of
# milliseconds, so imports, a worker and the report; about 1.1x floor), times the workers `-n auto` runs (one per
# usable core, at most 8). On 2 cores: (1.8 - 1.1) x 2 = 1.4. Each chapter's budget is its share by clause count.
CHECK_TARGET = 1.8

# name -> (command, what it is, target as a ratio to the floor or in seconds); the targets are wall seconds
COMMANDS = {
    "floor": ([sys.executable, "-c", "import torch, sympy, hypothesis, numpy"], "python -c 'import torch, sympy, hypothesis, numpy'", None),
    "check": (RLSPEC + ["check"], "rlspec check (reference, quick, -n auto)", ("ratio", CHECK_TARGET)),
    "check start": (RLSPEC + ["check", "--only", "GAE-SEED-EXAMPLE"], "rlspec check --only GAE-SEED-EXAMPLE (its start)", None),
    "check -n 1": (RLSPEC + ["check", "-n", "1"], "rlspec check -n 1 (one worker process)", None),
    "check --no-isolation": (RLSPEC + ["check", "--no-isolation", "--json", str(REPORT)], "rlspec check --no-isolation (in this process)", None),
    "prove": (RLSPEC + ["prove"], "rlspec prove (-n auto)", ("seconds", 5.0)),
    "prove -n 1": (RLSPEC + ["prove", "-n", "1"], "rlspec prove -n 1", None),
}

TESTS = ([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly"], "pytest (the README's test command)", ("seconds", 480.0))


CPU: dict[str, list[float]] = {}  # command name -> CPU seconds (user + system, the command and its workers) per round


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], name: str = "") -> float:
    """Wall seconds of ``command``; its CPU seconds (with every process it waited for) go to ``CPU[name]``."""
    start, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    CPU.setdefault(name, []).append(children_cpu() - cpu)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [""]
        raise SystemExit(f"benchmark: {' '.join(command[2:])} exited {done.returncode}: {tail[0]}")
    return seconds


def gae_oracle(steps: int, envs: int = 64) -> float:
    """Best of three calls of the reference ``gae`` on a (steps, envs) float64 rollout with episode ends."""
    import numpy as np

    from rlspec.reference.gae import gae

    rng = np.random.default_rng(0)
    r, v, nv = (rng.standard_normal((steps, envs)) for _ in range(3))
    terminated, truncated = rng.random((steps, envs)) < 0.01, rng.random((steps, envs)) < 0.005
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        gae(r, v, nv, terminated, truncated, 0.99, 0.95)
        best = min(best, time.perf_counter() - start)
    return best


def compile_sources() -> None:
    """rlspec's own sources compiled to bytecode before anything is timed, as installing rlspec from a wheel
    does and as any first run does where Python may write bytecode. Without it, an editable checkout in an
    environment that sets PYTHONDONTWRITEBYTECODE (this machine's, CI's) compiles every module of rlspec on
    every command, about 0.1 s that no installed rlspec pays, while the floor's packages come compiled."""
    import compileall

    for folder in ("checks", "spec", "reference"):
        compileall.compile_dir(ROOT / folder, quiet=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported (default 3)")
    parser.add_argument("--tests", action="store_true", help="also time the README's test command, once")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    args = parser.parse_args(argv)

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"rlspec benchmarks: {cores} usable cores, {args.rounds} round(s), python {sys.version.split()[0]}", flush=True)
    compile_sources()
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    chapters: dict[str, list[float]] = defaultdict(list)
    for round_ in range(args.rounds):
        for name, (command, _, _) in COMMANDS.items():  # interleaved: every figure sees the same load
            samples[name].append(timed(command, name))
        for chapter, seconds in chapter_seconds(REPORT).items():
            chapters[chapter].append(seconds)
        print(f"  round {round_ + 1}: " + ", ".join(f"{n} {s[-1]:.2f} s" for n, s in samples.items()), flush=True)
    figures = {name: statistics.median(s) for name, s in samples.items()}
    floor = figures["floor"]

    cpu = {name: statistics.median(s) for name, s in CPU.items()}
    rows = []
    for name, (_, what, target) in COMMANDS.items():
        rows.append((what, figures[name], figures[name] / floor, target, cpu[name] / cpu["floor"]))
    oracle = {steps: gae_oracle(steps) for steps in (25_000, 50_000, 100_000)}
    rows.append(("reference gae, T = 100000, N = 64 (best of 3, in-process)", oracle[100_000], None, ("seconds", 0.5), None))
    if args.tests:
        seconds = timed(TESTS[0], "tests")
        figures["tests"] = seconds
        rows.append((TESTS[1], seconds, seconds / floor, TESTS[2], CPU["tests"][0] / cpu["floor"]))

    # wall seconds and their ratio to the floor are the targets; CPU seconds (user + system of the command and its
    # workers) move far less on a loaded machine: their ratio to the floor's CPU says whether a change did less work
    print(f"\n{'figure':<62} {'seconds':>8} {'x floor':>8} {'cpu x floor':>11}  target (wall)")
    for what, seconds, ratio, target, cpu_ratio in rows:
        shown = f"{ratio:8.2f}" if ratio is not None else f"{'':>8}"
        shown += f" {cpu_ratio:11.2f}" if cpu_ratio is not None else f" {'':>11}"
        goal = "" if target is None else (f"<= {target[1]:g}x floor" if target[0] == "ratio" else f"<= {target[1]:g} s")
        met = "" if target is None else ("  met" if (ratio if target[0] == "ratio" else seconds) <= target[1] else "  NOT met")
        print(f"{what:<62} {seconds:8.2f} {shown}  {goal}{met}")
    print(f"floor: {floor:.2f} s wall, {cpu['floor']:.2f} s CPU")
    growth = oracle[100_000] / oracle[25_000]
    print(f"reference gae cost from T = 25000 to 100000: x{growth:.2f} (linear: x4); "
          + ", ".join(f"T = {t}: {s:.3f} s" for t, s in oracle.items()))
    budget = max(0.0, CHECK_TARGET - figures["check start"] / floor) * min(cores, 8)
    budgets = chapter_budgets(floor, {c: statistics.median(s) for c, s in chapters.items()}, budget)
    print_budgets(budgets, floor, budget)

    if args.json:
        Path(args.json).write_text(json.dumps({"cores": cores, "rounds": args.rounds, "samples": samples, "medians": figures,
                                               "cpu_samples": CPU,
                                               "gae_oracle": {str(t): s for t, s in oracle.items()},
                                               "chapters": budgets}, indent=1) + "\n")
    return 0


def chapter_seconds(report: Path) -> dict[str, float]:
    """Seconds per chapter in one ``rlspec check --json`` report (the clauses' own seconds, summed)."""
    from rlspec.spec import catalogue

    chapter = {c.id: c.chapter for c in catalogue.clauses()}
    seconds: dict[str, float] = defaultdict(float)
    for clause in json.loads(report.read_text())["clauses"]:
        seconds[chapter[clause["id"]]] += clause["seconds"]
    return dict(seconds)


def chapter_budgets(floor: float, seconds: dict[str, float], budget: float) -> dict[str, dict]:
    """Per chapter of the catalogue: clauses, seconds (median over rounds), x floor, budget x floor (its share of
    ``budget``, the clauses' budget in all as a ratio to the floor, by clause count), met."""
    from rlspec.spec import catalogue

    count: dict[str, int] = defaultdict(int)
    for clause in catalogue.clauses():
        count[clause.chapter] += 1
    total = sum(count.values())
    rows = {}
    for chapter, clauses in count.items():
        spent = seconds.get(chapter, 0.0)
        share = budget * clauses / total
        rows[chapter] = {"clauses": clauses, "seconds": round(spent, 3), "x_floor": round(spent / floor, 3),
                         "budget_x_floor": round(share, 3), "met": spent / floor <= share}
    return rows


def print_budgets(rows: dict[str, dict], floor: float, budget: float) -> None:
    print(f"\nper-chapter budget: clause seconds of `rlspec check --no-isolation` (quick, one process), x floor; "
          f"{budget:.2f}x floor in all (({CHECK_TARGET:g} - check start) x workers), shared by clause count")
    print(f"{'chapter':<16} {'clauses':>7} {'seconds':>8} {'x floor':>8} {'budget':>8}")
    for chapter, row in sorted(rows.items(), key=lambda kv: -kv[1]["x_floor"]):
        print(f"{chapter:<16} {row['clauses']:7d} {row['seconds']:8.2f} {row['x_floor']:8.3f} {row['budget_x_floor']:8.3f}"
              f"  {'met' if row['met'] else 'NOT met'}")
    spent = sum(r["seconds"] for r in rows.values())
    print(f"{'all':<16} {sum(r['clauses'] for r in rows.values()):7d} {spent:8.2f} {spent / floor:8.3f} {budget:8.3f}"
          f"  {'met' if spent / floor <= budget else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())

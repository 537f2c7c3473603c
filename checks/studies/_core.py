"""What every study shares: claims with explicit criteria, the result and its JSON, small statistics.

A study is an experiment on the suite's gridworld whose published claim is checked as code. The
claim functions are pure (measurements in, :class:`Claim` out), so a test can feed them wrong data
and see the claim reported as not holding. A result carries no timing, path or version string that
changes between runs: the same command writes the same JSON.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

SMALL, DEFAULT = "small", "default"  # study sizes: tests run "small", the command line "default"


class StudyError(Exception):
    """A study cannot run: bad arguments, or a candidate operation raised or returned something
    unusable. The message is one line."""


HOLDS, REFUTED, CANDIDATE_DIFFERS = "holds", "refuted", "candidate-differs"
VERDICT_WORDS = {
    HOLDS: "holds",
    REFUTED: "REFUTED (a finding: the published claim does not hold on rlspec's gridworld, the reference's run included)",
    CANDIDATE_DIFFERS: "CANDIDATE DIFFERS (the claim holds on the reference's run, not on the candidate's)",
}


@dataclass(frozen=True)
class Claim:
    """One published claim, the criterion that decides it, and what was measured.

    ``verdict``: ``holds``; ``refuted``, a finding about the claim (it does not hold on the reference's own run, so
    rlspec's MDP is a counterexample to it as published); ``candidate-differs``, a finding about the candidate (the
    claim holds on the reference's run and not on the candidate's). Only the last is the candidate's failure."""

    id: str  # stable within its study, e.g. "first-minibatch-zero"
    statement: str  # the claim in words
    source: str  # the published work it comes from (paper, section, arXiv id)
    criterion: str  # the explicit statistical or exact rule that decides it
    holds: bool
    measured: str  # the numbers behind the verdict, whether it holds or not
    verdict: str = ""  # set by studies.run: holds, refuted or candidate-differs

    def line(self) -> str:
        word = VERDICT_WORDS.get(self.verdict or (HOLDS if self.holds else REFUTED))
        return f"  {word}\n        claim: {self.statement}\n        criterion: {self.criterion}\n        measured: {self.measured}"


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple, ...]

    def text(self) -> str:
        cells = [[_cell(v) for v in row] for row in self.rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(self.columns)]
        lines = ["  ".join(c.rjust(w) for c, w in zip(self.columns, widths))]
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
        return "\n".join(lines)

    def markdown(self) -> str:
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in self.rows]
        return "\n".join(lines)


def _cell(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        return f"{value:.3g}" if 1e-3 <= abs(value) < 1e4 else f"{value:.2e}"
    return str(value)


@dataclass
class StudyResult:
    """Everything a study reports; ``to_json`` is the file ``--out`` receives."""

    study: str
    title: str
    illustrates: dict  # {"chapter": ..., "clauses": [...]}: where the book embeds it
    sources: list[str]
    candidate: str
    operations: dict[str, str]  # operation -> "candidate" or "reference"
    seeds: int
    size: str
    settings: dict
    table: Table
    claims: list[Claim]
    data: dict  # the measured series the figure is drawn from
    notes: list[str] = field(default_factory=list)
    figure: str | None = None  # file name of the PNG beside the JSON

    @property
    def holds(self) -> bool:
        """The judged subject's claims all hold (a reference run shown beside a candidate's does not count)."""
        return all(c.holds for c in self.claims if not c.id.startswith("reference:"))

    @property
    def findings(self) -> list[Claim]:
        """The judged claims refuted on rlspec's gridworld: they do not hold on the reference's run either."""
        return [c for c in self.claims if not c.id.startswith("reference:") and c.verdict == REFUTED]

    @property
    def differences(self) -> list[Claim]:
        """The judged claims the candidate breaks: they hold on the reference's run, not on the candidate's."""
        return [c for c in self.claims if not c.id.startswith("reference:") and c.verdict == CANDIDATE_DIFFERS]

    def to_json(self) -> str:
        from ..runner.engine import VERSION

        payload = {
            "rlspec": VERSION, "study": self.study, "title": self.title, "illustrates": self.illustrates,
            "sources": self.sources, "candidate": self.candidate, "operations": self.operations,
            "seeds": self.seeds, "size": self.size, "settings": self.settings,
            "table": {"columns": list(self.table.columns), "rows": [list(r) for r in self.table.rows]},
            "claims": [asdict(c) for c in self.claims], "holds": self.holds,
            "findings": [c.id for c in self.findings], "candidate_differs": [c.id for c in self.differences], "notes": self.notes,
            "figure": self.figure, "data": self.data,
        }
        return json.dumps(_plain(payload), indent=1, sort_keys=False, allow_nan=False) + "\n"

    def text(self) -> str:
        lines = [f"{self.study}: {self.title}",
                 f"candidate {self.candidate} · {self.seeds} seeds · size {self.size} · "
                 + (", ".join(f"{op} from the {who}" for op, who in self.operations.items()) or "no candidate operation (exact dynamic programming)"),
                 "", self.table.text(), ""]
        judged = [c for c in self.claims if not c.id.startswith("reference:")]
        shown = [c for c in self.claims if c.id.startswith("reference:")]
        if shown:
            lines.append("claims, judged on the candidate's run:")
        lines += [c.line() for c in judged]
        if shown:
            lines.append("the same claims on the reference's run, for comparison:")
            lines += [c.line() for c in shown]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _plain(value):
    """JSON-ready: numpy scalars and arrays to Python, floats rounded to 12 significant digits (the
    last bits of a float64 sum are not worth a diff), non-finite floats to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return float(f"{v:.12g}") if math.isfinite(v) else None
    return value


# ------------------------------------------------------------------------------------------------
# statistics over seeds


def mean_se(x) -> tuple[float, float]:
    """Mean and its standard error (sample std with ddof = 1, over sqrt(n)) of per-seed values."""
    x = np.asarray(x, dtype=np.float64)
    se = float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("nan")
    return float(x.mean()), se


def sign_flip_p(x) -> float:
    """One-sided p-value of the paired sign-flip (randomisation) test for mean(x) > 0.

    Under H0 each per-seed difference is symmetric about 0, so every flip of signs is equally
    likely; p = Pr(mean of flipped >= observed mean). Exact enumeration for n <= 16 seeds (at most
    65536 flips); beyond that 65536 flips drawn from a fixed seed (still deterministic). With n
    seeds the smallest possible p is 2^-n: 5 seeds can reach 0.031, 8 seeds 0.0039.
    """
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n == 0:
        return 1.0
    if n <= 16:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))  # (2^n, n)
    else:
        signs = np.where(np.random.default_rng(0).random((65536, n)) < 0.5, -1.0, 1.0)
        signs[0] = 1.0
    flipped = signs @ x / n
    observed = x.mean()
    return float(np.mean(flipped >= observed - 1e-12 * max(1.0, abs(observed))))


def fmt_mean(x, digits: int = 3) -> str:
    m, se = mean_se(x)
    return f"{m:.{digits}g} ± {se:.2g} (s.e., n = {len(np.atleast_1d(x))})"


# ------------------------------------------------------------------------------------------------
# torch hygiene


@contextlib.contextmanager
def quiet_torch(threads: int = 1):
    """One torch thread (determinism, and the 2-core machines), the global RNG untouched, restored after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_num_threads(before)


def call_op(name: str, function: Callable, *args, **kwargs) -> Any:
    """Call a candidate operation; any exception becomes a one-line :class:`StudyError`."""
    try:
        return function(*args, **kwargs)
    except (KeyboardInterrupt, MemoryError):
        raise
    except StudyError:
        raise
    except BaseException as exc:  # a candidate cannot crash the study
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise StudyError(f"{name} raised {type(exc).__name__}" + (f": {message}" if message else "")) from None

"""Reports: the terminal table, the JSON report (format in the README) and JUnit XML."""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from typing import TextIO

from .runner.engine import ClauseResult, ConformanceResult, VERSION
from ..spec import catalogue

WIDTH_ID = 42


def header(candidate: str, profile: str, seed: int, dtype: str, device: str, conventions: dict | None = None) -> str:
    """The first line of the table; the candidate's declared conventions follow it, if it declares any."""
    line = f"rlspec {VERSION} · candidate {candidate} · profile {profile} · seed {seed} · {dtype} · {device}"
    if conventions:
        line += "\n  conventions: " + ", ".join(f"{key} = {value!r}" for key, value in conventions.items())
    return line


def _operation(result: ClauseResult) -> str:
    return result.operation if isinstance(result.operation, str) else ",".join(result.operation)


def _width_operation() -> int:
    return max([len(",".join(c.operations)) for c in catalogue.clauses()] + [9])


def shown_status(result: ClauseResult) -> str:
    return "XPASS" if result.xpass and result.status == "pass" else result.status


def row(result: ClauseResult, style: "Style | None" = None, counter: str = "") -> str:
    """One line of the per-clause table (printed as each clause finishes: the run's progress)."""
    status = shown_status(result)
    painted = (style or Style()).paint(f"{status:<13}", status)
    return f"{counter}  {painted} {result.id:<{WIDTH_ID}} {_operation(result):<{_width_operation()}} {result.seconds:6.2f}s"


class Style:
    """ANSI colour for a terminal: on with ``--color always``, or ``auto`` on a TTY unless ``NO_COLOR`` is set
    (no-color.org) or ``TERM=dumb``; never in a file, a pipe or ``--json -``'s stderr unless asked."""

    CODES = {"pass": "32", "fail": "1;31", "error": "1;31", "xfail": "33", "XPASS": "1;33", "skip": "2",
             "not-provided": "2", "warning": "33", "cause": "36"}

    def __init__(self, enabled: bool = False):
        self.enabled = enabled

    @classmethod
    def choose(cls, mode: str, stream) -> "Style":
        import os

        if mode == "always":
            return cls(True)
        if mode == "never" or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
            return cls(False)
        return cls(bool(getattr(stream, "isatty", lambda: False)()))

    def paint(self, text: str, kind: str) -> str:
        code = self.CODES.get(kind)
        return f"\033[{code}m{text}\033[0m" if self.enabled and code else text


class Table:
    """The streamed per-clause table: an N/M counter on each row; the not-provided rows folded into one line
    at the end (unless ``fold`` is off: ``--verbose``)."""

    def __init__(self, total: int, style: Style, fold: bool = True):
        self.total, self.style, self.fold = total, style, fold
        self.done = 0
        self.not_provided: list[ClauseResult] = []

    def row(self, result: ClauseResult) -> str | None:
        self.done += 1
        if self.fold and result.status == "not-provided":
            self.not_provided.append(result)
            return None
        width = len(str(self.total))
        return row(result, self.style, f"[{self.done:>{width}}/{self.total}]")

    def folded(self) -> str:
        if not self.not_provided:
            return ""
        operations = sorted({op for r in self.not_provided for op in ([r.operation] if isinstance(r.operation, str) else r.operation)})
        shown = ", ".join(operations[:6]) + (f" and {len(operations) - 6} more" if len(operations) > 6 else "")
        label = self.style.paint(f"{'not-provided':<13}", "not-provided")
        return (f"  {label} {len(self.not_provided)} clauses of operations the candidate does not provide or declares "
                f"it lacks ({shown}); --verbose lists them")


def _indent(text: str, prefix: str = "    ") -> str:
    return textwrap.indent(text, prefix)


def details(result: ClauseResult) -> str:
    """The self-contained account of one failure or error."""
    lines = [f"{result.id} ({_operation(result)}): {shown_status(result)}", _indent(result.message)]
    if result.cause and result.status == "fail":
        lines.append(_indent(f"likely cause: {result.cause}"))
    for known in result.evidence:
        lines.append(_indent(known))
    if result.call:
        lines.append(_indent(f"call: {result.call}"))
    if result.counterexample:
        lines.append(_indent(result.counterexample, "      "))
    for note in result.notes:
        lines.append(_indent(f"note: {note}"))
    if result.replay:
        lines.append(_indent(f"replay: {result.replay}"))
    return "\n".join(lines)


def summary_line(run: ConformanceResult) -> str:
    xpass = sum(r.xpass and r.status == "pass" for r in run.results)
    counts = ", ".join(f"{n} {status}" + (f" ({xpass} XPASS)" if status == "pass" and xpass else "")
                       for status, n in run.summary.items() if n)
    state = "INCOMPLETE, " if run.incomplete else ""
    return f"{len(run.results)} clauses: {state}{counts or 'none run'} in {run.seconds:.1f} s (seed {run.seed})"


def grouped(run: ConformanceResult) -> list[str]:
    """The run-level summary: per operation with failing clauses, how many failed, the causes the evidence
    names, and the features every failing clause's shrunk input shares."""
    by_operation: dict[str, list[ClauseResult]] = {}
    for result in run.results:
        if result.status == "fail":
            by_operation.setdefault(_operation(result), []).append(result)
    lines = []
    for operation, failed in by_operation.items():
        if len(failed) < 2:
            continue
        line = f"{operation}: {len(failed)} clauses fail"
        causes: dict[str, int] = {}
        for result in failed:
            if result.cause:
                causes[result.cause] = causes.get(result.cause, 0) + 1
        if causes:
            line += "; " + "; ".join(f"likely cause in {n}: {cause}" for cause, n in causes.items())
        with_features = [set(r.features) for r in failed if r.features]
        common = set.intersection(*with_features) if len(with_features) == len(failed) else set()
        if common:
            line += f"; every failing clause's shrunk input has {', '.join(sorted(common))}"
        if not causes and not common:
            line += " (no known wrong answer matches and their shrunk inputs share no feature: start from the first)"
        lines.append(line)
    return lines


def write_terminal_footer(run: ConformanceResult, out: TextIO, style: Style | None = None) -> None:
    style = style or Style()
    bad = [r for r in run.results if r.status in ("fail", "error")]
    if bad:
        out.write("\n" + "\n\n".join(details(r) for r in bad) + "\n\n")
    for line in grouped(run):
        out.write(f"summary: {line}\n")
    for warning in run.warnings:
        out.write(style.paint(f"warning: {warning}", "warning") + "\n")
    out.write(summary_line(run) + "\n")


def _escape(text: str, property_: bool = False) -> str:
    """GitHub workflow-command escaping (data: %, CR, LF; a property also : and ,)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_ else text


def github_annotations(run: ConformanceResult, candidate: str) -> str:
    """GitHub Actions annotations (``::error title=...::...``): one per failing or erroring clause, a warning
    per XPASS, attached to the candidate's file when it is one."""
    from pathlib import Path

    target = candidate.partition(":")[0]
    where = ""
    if target.endswith(".py") and Path(target).is_file():
        try:
            shown = Path(target).resolve().relative_to(Path.cwd())
        except ValueError:
            shown = Path(target).resolve()
        where = f"file={_escape(str(shown), True)},"
    out = []
    for result in run.results:
        if result.status in ("fail", "error"):
            kind = "error"
        elif result.xpass:
            kind = "warning"
        else:
            continue
        title = _escape(f"rlspec {result.id} ({_operation(result)}): {shown_status(result)}", True)
        out.append(f"::{kind} {where}title={title}::{_escape(details(result))}")
    return "".join(line + "\n" for line in out)


def junit(run: ConformanceResult) -> str:
    chapters = {c.id: c.chapter for c in catalogue.clauses()}
    suite = ET.Element(
        "testsuite",
        name=f"rlspec[{run.candidate}]",
        tests=str(len(run.results)),
        failures=str(run.summary["fail"]),
        errors=str(run.summary["error"]),
        skipped=str(run.summary["skip"] + run.summary["not-provided"] + run.summary["xfail"]),
        time=f"{run.seconds:.3f}",
    )
    properties = ET.SubElement(suite, "properties")
    for name in ("profile", "seed", "dtype", "device"):
        ET.SubElement(properties, "property", name=name, value=str(getattr(run, name)))
    for result in run.results:
        case = ET.SubElement(
            suite, "testcase", classname=f"rlspec.{chapters.get(result.id, 'unknown')}", name=result.id,
            time=f"{result.seconds:.3f}",
        )
        if result.status == "fail":
            ET.SubElement(case, "failure", message=result.message).text = details(result)
        elif result.status == "error":
            ET.SubElement(case, "error", message=result.message).text = details(result)
        elif result.status in ("skip", "not-provided", "xfail"):
            reason = "; ".join([result.message] + result.notes).strip("; ")
            ET.SubElement(case, "skipped", message=f"{result.status}: {reason}")
    if run.incomplete:
        ET.SubElement(properties, "property", name="incomplete", value="true")
    return ET.tostring(suite, encoding="unicode") + "\n"

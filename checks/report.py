"""Reports: the terminal table, the JSON report (format in the README) and JUnit XML."""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from typing import TextIO

from .engine import ClauseResult, ConformanceResult, VERSION
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


def row(result: ClauseResult) -> str:
    """One line of the per-clause table (printed as each clause finishes: the run's progress)."""
    return f"  {result.status:<13} {result.id:<{WIDTH_ID}} {_operation(result):<{_width_operation()}} {result.seconds:6.2f}s"


def _indent(text: str, prefix: str = "    ") -> str:
    return textwrap.indent(text, prefix)


def details(result: ClauseResult) -> str:
    """The self-contained account of one failure or error."""
    lines = [f"{result.id} ({_operation(result)}): {result.status}", _indent(result.message)]
    if result.cause and result.status == "fail":
        lines.append(_indent(f"likely cause: {result.cause}"))
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
    counts = ", ".join(f"{n} {status}" for status, n in run.summary.items() if n)
    state = "INCOMPLETE, " if run.incomplete else ""
    return f"{len(run.results)} clauses: {state}{counts or 'none run'} in {run.seconds:.1f} s (seed {run.seed})"


def write_terminal_footer(run: ConformanceResult, out: TextIO) -> None:
    bad = [r for r in run.results if r.status in ("fail", "error")]
    if bad:
        out.write("\n" + "\n\n".join(details(r) for r in bad) + "\n\n")
    for warning in run.warnings:
        out.write(f"warning: {warning}\n")
    out.write(summary_line(run) + "\n")


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

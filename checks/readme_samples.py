"""The README's sample outputs, generated from real runs (``python -m rlspec.checks.readme_samples README.md``
rewrites them; tests/test_readme.py runs them afresh and compares, timings aside).

Each sample sits between ``<!-- sample: NAME ... -->`` and ``<!-- end of sample -->`` in the README. Paths of
this checkout print as ``~/rlspec``; a long table keeps its first rows and its last.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTANT = "tests/mutants/gae_truncation_as_terminal.py"
SAMPLES = {
    "first-run": ["check"],
    "failure": ["check", "--candidate", MUTANT, "--only", "GAE-TRUNCATION-BOOTSTRAP"],
    "json": ["check", "--candidate", MUTANT, "--only", "GAE-SEED-EXAMPLE,GAE-TRUNCATION-BOOTSTRAP", "--json", "-"],
}
TIMES = re.compile(r"\d+\.\d+ ?s\b")
BLOCK = re.compile(r"(<!-- sample: (?P<name>[a-z-]+)[^>]*-->\n)(?P<body>.*?)(<!-- end of sample -->)", re.S)


def _run(argv: list[str]) -> str:
    from .cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main(argv + ["--color", "never"])
    return out.getvalue().replace(str(ROOT), "~/rlspec")


def _shorten(value, limit: int = 70):
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + "..."
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    return value


def render(name: str) -> str:
    """One sample as the README shows it (a fenced block)."""
    argv = SAMPLES[name]
    text = _run(argv)
    if name == "first-run":
        lines = text.rstrip("\n").splitlines()
        text = "\n".join(lines[:4] + ["  ..."] + lines[-2:]) + "\n"
        return f"```\n$ rlspec check\n{text}```\n"
    if name == "json":
        data = json.loads(text)
        data["clauses"] = [{k: c[k] for k in c if k != "conventions"} for c in data["clauses"]]
        return "```json\n" + json.dumps(_shorten(data), indent=1) + "\n```\n"
    shown = " ".join(a if " " not in a else repr(a) for a in argv)
    return f"```\n$ rlspec {shown}\n{text}```\n"


def masked(text: str) -> str:
    """A sample with its timings masked (they differ from run to run)."""
    text = TIMES.sub("T s", text)
    return re.sub(r'"seconds": [0-9.]+', '"seconds": T', text)


def blocks(readme: str) -> dict[str, str]:
    return {m["name"]: m["body"] for m in BLOCK.finditer(readme)}


def rewrite(readme: Path) -> None:
    text = readme.read_text(encoding="utf-8")
    text = BLOCK.sub(lambda m: m.group(1) + render(m["name"]) + m.group(4), text)
    readme.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    rewrite(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "README.md"))

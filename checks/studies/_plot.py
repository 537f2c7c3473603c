"""Figures for the studies: matplotlib's object API on the Agg canvas (no pyplot, no global backend or
rcParams change), PNGs without a version string so the same data give the same bytes. A study's
module only describes what to draw on the axes; matplotlib is imported here, when a figure is asked for.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

STYLE = {"candidate": {"ls": "-", "marker": "o"}, "reference": {"ls": "--", "marker": "s"}}


def render(draw, by_subject: dict, path: Path, columns: int = 2, width: float = 9.0, height: float = 3.6, claims=()) -> Path:
    """``draw(axes, by_subject)`` on a row of ``columns`` axes, saved as a PNG at ``path``; under the axes, one line per
    claim the study tests (``claims``: its Claims as judged), marked with its verdict, so the figure says what it tests."""
    lines = [(_mark(c), f"{c.id}: {_short(c.statement)}") for c in claims]
    band = 0.2 * len(lines) + (0.15 if lines else 0.0)  # inches of claim lines below the axes
    with matplotlib.rc_context({"font.size": 8}):
        fig = Figure(figsize=(width, height + band))
        FigureCanvasAgg(fig)  # attaches itself: savefig renders with Agg whatever pyplot's backend is
        axes = fig.subplots(1, columns)
        draw(list(axes) if columns > 1 else [axes], by_subject)
        fig.tight_layout(rect=(0, band / (height + band), 1, 1))
        for k, ((word, colour), text) in enumerate(lines):
            y = (band - 0.1 - 0.2 * k) / (height + band)
            fig.text(0.01, y, word, color=colour, fontweight="bold", va="top", ha="left")
            fig.text(0.11, y, text, va="top", ha="left")
        fig.savefig(path, dpi=110, metadata={"Software": None})
    return path


VERDICT_MARKS = {"holds": ("holds", "#1b7a3a"), "refuted": ("refuted", "#b3261e"), "candidate-differs": ("differs", "#b3261e")}


def _mark(claim) -> tuple[str, str]:
    return VERDICT_MARKS.get(claim.verdict or ("holds" if claim.holds else "refuted"))


def _short(text: str, limit: int = 150) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + " …"


def label(subject: str, text: str, subjects) -> str:
    """A legend entry; the subject is named only when a candidate is shown beside the reference."""
    return f"{text} ({subject})" if len(subjects) > 1 else text

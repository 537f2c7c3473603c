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


def render(draw, by_subject: dict, path: Path, columns: int = 2, width: float = 9.0, height: float = 3.6) -> Path:
    """``draw(axes, by_subject)`` on a row of ``columns`` axes, saved as a PNG at ``path``."""
    with matplotlib.rc_context({"font.size": 8}):
        fig = Figure(figsize=(width, height))
        FigureCanvasAgg(fig)  # attaches itself: savefig renders with Agg whatever pyplot's backend is
        axes = fig.subplots(1, columns)
        draw(list(axes) if columns > 1 else [axes], by_subject)
        fig.tight_layout()
        fig.savefig(path, dpi=110, metadata={"Software": None})
    return path


def label(subject: str, text: str, subjects) -> str:
    """A legend entry; the subject is named only when a candidate is shown beside the reference."""
    return f"{text} ({subject})" if len(subjects) > 1 else text

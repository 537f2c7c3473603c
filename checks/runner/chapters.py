"""Every chapter's checks: importing ``checks/clauses/`` registers them in the kit's registry."""

from __future__ import annotations

from ..kit.registry import CHECKS, Check


def load_all() -> dict[str, list[Check]]:
    """Import every chapter's checks (registration happens at import)."""
    from .. import clauses  # noqa: F401

    return CHECKS

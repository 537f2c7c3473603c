"""Checks register against catalogue clause ids; the engine and the docs read this registry (filled by importing
the chapters: :func:`rlspec.checks.runner.chapters.load_all`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

CHECKS: dict[str, list["Check"]] = {}


@dataclass(frozen=True)
class Check:
    clause: str
    name: str
    function: Callable
    module: str

    @property
    def qualified(self) -> str:
        return f"{self.module}:{self.name}"

    @property
    def doc(self) -> str:
        return " ".join((self.function.__doc__ or "").split())


def check(clause_id: str):
    """Register the decorated ``fn(ctx)`` as a check of ``clause_id``."""

    def register(function):
        CHECKS.setdefault(clause_id, []).append(Check(clause_id, function.__name__, function, function.__module__))
        return function

    return register

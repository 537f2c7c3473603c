"""``[tool.rlspec]`` in a project's ``pyproject.toml``: the options and declarations a project keeps.

    [tool.rlspec]
    candidate = "rlspec_adapter.py"      # a path is relative to this pyproject.toml's folder
    profile = "ci"
    require = ["gae", "ppo_clip_loss"]   # a CI gate fails (exit 2) the day one of them disappears
    xfail = "rlspec.xfail"               # a file of CLAUSE-ID  # reason lines, or a table {"CLAUSE-ID" = "reason"}
    xfail-strict = true                  # an xfail entry whose clause passes fails the run
    precision = {gae = "float32"}        # RLSPEC_PRECISION, as the candidate would declare it
    conventions = {advantage_std_ddof = 1}

``rlspec check`` reads the first ``pyproject.toml`` with a ``[tool.rlspec]`` table from the working
directory upwards (or ``--config FILE``); an option given on the command line wins. Keys are written with
dashes or underscores. A key rlspec does not know is an error (exit 2) that names it and suggests the
nearest one, never ignored; so is a value of the wrong type.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...spec import contract

# key -> (type check, what it takes); the command line's options of the same name (dashes for underscores)
OPTIONS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "candidate": (str, "a built-in name, dotted module or .py file (relative to this file's folder)"),
    "profile": (str, "quick, ci or thorough"),
    "seed": (int, "an integer"),
    "dtype": (str, "float64 or float32"),
    "device": (str, "cpu or cuda"),
    "only": ((str, list), "clause ids, globs or chapters (a string with commas, or a list)"),
    "require": (list, "a list of operations the candidate must provide"),
    "xfail": ((str, dict), "a file of CLAUSE-ID  # reason lines (relative to this file's folder), or a table id -> reason"),
    "xfail_strict": (bool, "true or false"),
    "json": (str, "a path for the JSON report"),
    "junit": (str, "a path for JUnit XML"),
    "workers": ((int, str), "a number or 'auto'"),
    "time_limit": ((int, float), "seconds"),
    "memory_limit": (int, "megabytes"),
    "color": (str, "auto, always or never"),
    "annotate": (str, "github or none"),
    "precision": ((str, dict), "RLSPEC_PRECISION: a precision, or a table operation -> precision"),
    "conventions": (dict, "RLSPEC_CONVENTIONS: a table convention -> value"),
}
PATHS = ("candidate", "json", "junit")  # relative to the config's folder (candidate: when it names a file there)


class ConfigError(ValueError):
    """A ``[tool.rlspec]`` table rlspec cannot accept; the message is one line that names the key."""


@dataclass
class Config:
    path: Path | None = None
    values: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default=None):
        return self.values.get(key, default)

    @property
    def overrides(self) -> dict[str, Any]:
        """The declarations it makes, as ``loader.load(overrides=...)`` takes them."""
        out: dict[str, Any] = {}
        if "precision" in self.values:
            out["RLSPEC_PRECISION"] = self.values["precision"]
        if "conventions" in self.values:
            out["RLSPEC_CONVENTIONS"] = self.values["conventions"]
        return out


def find(start: Path | None = None) -> Path | None:
    """The first pyproject.toml with a ``[tool.rlspec]`` table from ``start`` (the working directory) upwards."""
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue  # someone else's broken file: not ours to judge unless named with --config
            if isinstance(data.get("tool"), dict) and "rlspec" in data["tool"]:
                return path
    return None


def read(path: Path | str | None) -> Config:
    """The validated ``[tool.rlspec]`` of ``path`` (an empty Config for None)."""
    if path is None:
        return Config()
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read --config {path}: {getattr(exc, 'strerror', None) or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    table = data.get("tool", {}).get("rlspec") if isinstance(data.get("tool"), dict) else None
    if table is None:
        raise ConfigError(f"{path}: no [tool.rlspec] table")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.rlspec] must be a table")
    values: dict[str, Any] = {}
    for raw_key, value in table.items():
        key = raw_key.replace("-", "_")
        if key not in OPTIONS:
            known = [k.replace("_", "-") for k in OPTIONS]
            raise ConfigError(f"{path}: [tool.rlspec] has no key {raw_key!r}"
                              f"{contract.nearest(raw_key.replace('_', '-'), known)} (known: {', '.join(known)})")
        kind, what = OPTIONS[key]
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            raise ConfigError(f"{path}: [tool.rlspec] {raw_key} = {value!r}; expected {what}")
        values[key] = value
    folder = path.resolve().parent
    for key in PATHS:
        value = values.get(key)
        if isinstance(value, str) and value != "-" and (key != "candidate" or value.endswith(".py") or "/" in value):
            values[key] = str(folder / value)
    if isinstance(values.get("xfail"), str):
        values["xfail"] = str(folder / values["xfail"])
    if isinstance(values.get("only"), list):
        values["only"] = ",".join(map(str, values["only"]))
    try:
        if "precision" in values:
            contract.validate_precision(values["precision"])
        if "conventions" in values:
            contract.validate_conventions(values["conventions"])
        if "require" in values:
            contract.validate_operation_names(values["require"], "require")
        if isinstance(values.get("xfail"), dict):
            values["xfail"] = {str(k).upper(): str(v) for k, v in values["xfail"].items()}
            contract.validate_clause_ids(values["xfail"], "xfail")
    except contract.ContractError as exc:
        raise ConfigError(f"{path}: [tool.rlspec] {exc}") from None
    return Config(path.resolve(), values)

"""Which way imports run: the contracts declared once in pyproject.toml's ``[tool.importlinter]`` (spec/ and
reference/ under checks/; inside checks/ the front ends, products, runner, chapters and kit, each importing only
those below it; no chapter importing another; the library adapters importing nothing of rlspec and imported
by nothing) are checked by import-linter on this checkout, and shown to fail on a copy of it where one module
imports the wrong way."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

pytest.importorskip("importlinter", reason="import-linter is in the dev extra (pip install -e '.[dev]')")

CONFIG = ROOT / "pyproject.toml"
# the distribution's folders, as the wheel lays them out (pyproject.toml's package-dir)
FOLDERS = {"spec": "spec", "reference": "reference", "checks": "checks"}
LINT = ("import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename=sys.argv[1], limit_to_contracts=tuple(sys.argv[2:]), no_cache=True))")


def lint(python_path: Path | None = None, contract: str | None = None) -> subprocess.CompletedProcess:
    """``lint-imports`` on the declared contracts (or the one with id ``contract``), in a fresh interpreter, so
    that ``python_path``, when given, is where ``rlspec`` is found (grimp reads the source files of the packages
    the import system locates)."""
    env = dict(os.environ)
    if python_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(python_path), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run([sys.executable, "-c", LINT, str(CONFIG), *([contract] if contract else [])],
                          capture_output=True, text=True, env=env, cwd=python_path or ROOT, timeout=300)


def test_the_declared_layers_hold():
    done = lint()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout


@pytest.fixture
def copy(tmp_path) -> Path:
    """The checkout's three folders laid out as the installed namespace package ``rlspec`` (no __init__.py
    of its own), for a wrong import to be written into."""
    for package, folder in FOLDERS.items():
        shutil.copytree(ROOT / folder, tmp_path / "rlspec" / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


# (the module that imports the wrong way, the import, the id of the contract it breaks)
WRONG = [
    ("checks/clauses/gae.py", "from ..runner import protocol", "checks-layers"),  # a chapter reaching into the runner
    ("checks/kit/tolerances.py", "from ..clauses import gae", "checks-layers"),  # the kit importing a chapter
    ("checks/runner/engine.py", "from .. import cli", "checks-layers"),  # the runner importing a front end
    ("checks/clauses/ppo.py", "from . import gae", "chapters"),  # one chapter importing another
    ("reference/gae.py", "from ..spec import contract", "folders"),  # the reference reading the spec
    ("spec/catalogue.py", "from ..checks.kit import tolerances", "folders"),  # the spec importing the checks
    ("checks/adapters/sb3.py", "from ..runner import protocol", "adapters-import-nothing"),
    ("checks/runner/loader.py", "from ..adapters import sb3", "nothing-imports-adapters"),
]


@pytest.mark.parametrize("module, statement, contract", WRONG, ids=[f"{w[2]}:{w[0]}" for w in WRONG])
def test_a_wrong_import_breaks_the_contract(copy, module, statement, contract):
    kept = lint(copy, contract)
    assert kept.returncode == 0, "the unmodified copy must keep the contract, or the test proves nothing\n" + kept.stdout
    path = copy / "rlspec" / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{statement}  # the wrong way\n", encoding="utf-8")
    broken = lint(copy, contract)
    assert broken.returncode != 0 and "1 broken" in broken.stdout, broken.stdout + broken.stderr
    importer = "rlspec." + module.removesuffix(".py").replace("/", ".")
    assert importer in broken.stdout, broken.stdout  # the report names the module that imports the wrong way

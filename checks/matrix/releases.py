"""The conformance matrix across releases: each library release in its adapter's declared range, installed
in an environment of its own, checked, and kept per (library, version) in ``docs/matrix-history/``.

    rlspec matrix --releases all                            # every adapter, every release in its range
    rlspec matrix --releases all --adapters sb3,skrl        # some adapters
    rlspec matrix --releases 2.0.0,2.9.2 --adapters sb3     # chosen releases (one adapter)
    rlspec matrix --releases all --shard 2/4 --json s2.json # one deterministic slice of the cells
    rlspec matrix merge s1.json s2.json s3.json s4.json     # the shards' reports -> docs/matrix-history

**The range.** Every built-in adapter declares the releases whose API it drives, as data at the top of its
module (read here with :mod:`ast`, so the library need not be installed to plan a run)::

    RELEASES = {
        "distribution": "stable-baselines3",   # the PyPI name of the library
        "range": ">=2.0.0",                     # a PEP 440 specifier set
        "why": "2.0.0 is SB3's first release on Gymnasium (terminated / truncated)",
        "with": {"tensordict": "=={major}.{minor}.*"},   # optional: companions, released in step
    }

A release outside the range is reported as outside it, with the reason, never run and never failed.

**The cells.** A run is the product (adapter x release x profile x seed), in a fixed order: adapters by
name, releases by version, then profiles and seeds as given. ``--shard i/n`` takes the i-th of n contiguous,
nearly equal slices of that list (so a release's cells stay together but at a slice's edge), and each shard
installs only the environments its cells need. ``merge`` checks that the shards share one plan (same cells,
same rlspec commit) and that each slice appears once, then orders the cells as the plan does: the merged
report is the report one unsharded run writes (tests/test_releases.py).

**An environment per release.** ``python -m venv --system-site-packages`` from the base interpreter (rlspec's own
dependencies and the machine's torch come from there), then ``pip install -c CONSTRAINTS DIST==RELEASE
COMPANIONS`` (the constraint holds torch at the machine's build: a release that pins another torch, which
would pull a multi-GB CUDA build, is *not installable here* and reported so), then rlspec itself from the
checkout (``--no-deps``: the release's own pins win, e.g. an older Gymnasium). A group with an install script
(``.ci/install/NAME.sh PYTHON CONSTRAINTS``, verl and OpenRLHF) runs it with ``RLSPEC_RELEASE`` set. The
installed version must be the release asked for. Each environment is deleted after its cells unless
``--keep-envs``; pip's cache is reused.

**Cell statuses.** ``checked`` (the adapter ran: its report, as ``rlspec matrix`` writes one per adapter),
``not-installable`` (pip could not install the release here: the reason is pip's), ``outside-range`` (not
run), ``not-loadable`` (installed, but the adapter could not be imported on it: its reason) and ``failed``
(the run itself broke: the reason). Only ``checked`` cells carry verdicts.
"""

from __future__ import annotations

import ast
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA = 1
KIND = "rlspec-release-history"
ROOT = Path(__file__).resolve().parents[2]
ADAPTERS_DIR = Path(__file__).resolve().parents[1] / "adapters"
DECLARATION = "RELEASES"
KEYS = {"distribution", "range", "why", "with"}
TEMPLATE_FIELDS = {"major", "minor", "micro", "version"}
CANONICAL = ("ci", 0)  # the profile and seed of docs/conformance.json: their records have no suffix
INDEX = "releases.json"  # per adapter, beside its records: every release tried and what became of it
# the packages whose versions an environment's record lists (besides the adapter's distribution and companions)
ENVIRONMENT_PACKAGES = ("torch", "numpy", "gymnasium", "jax", "jaxlib", "distrax", "tensordict", "transformers",
                        "accelerate", "stable-baselines3")


class ReleasesError(ValueError):
    """A declaration, a release selection, a shard or a shard report that cannot be used: one line."""


def _packaging():
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - packaging comes with pip, setuptools and pytest
        raise ReleasesError("rlspec matrix --releases needs the `packaging` package (pip install packaging)") from None
    return SpecifierSet, Version, InvalidSpecifier, InvalidVersion


# ------------------------------------------------------------------------------------------------
# the declaration


@dataclass(frozen=True)
class Declaration:
    adapter: str
    distribution: str
    range: str  # a PEP 440 specifier set
    why: str
    companions: tuple[tuple[str, str], ...] = ()  # (distribution, specifier template)

    def contains(self, release: str) -> bool:
        SpecifierSet, Version, _, InvalidVersion = _packaging()
        try:
            return SpecifierSet(self.range).contains(Version(release), prereleases=True)
        except InvalidVersion:
            return False

    def requirements(self, release: str) -> list[str]:
        """What pip installs for this release: the library pinned, its companions from their templates."""
        return [f"{self.distribution}=={release}"] + [f"{name}{fill(template, release)}" for name, template in self.companions]

    def to_json(self) -> dict:
        return {"distribution": self.distribution, "range": self.range, "why": self.why,
                "with": dict(self.companions)}


def fill(template: str, release: str) -> str:
    """A companion's specifier for a release: ``"=={major}.{minor}.*"`` with 2.3.0 -> ``==2.3.*``."""
    _, Version, _, _ = _packaging()
    v = Version(release)
    return template.format(major=v.major, minor=v.minor, micro=v.micro, version=release)


def adapter_file(adapter: str) -> Path:
    return ADAPTERS_DIR / f"{adapter}.py"


def declared(adapter: str, source: str | None = None) -> Declaration:
    """The adapter's ``RELEASES``, read from its source without importing it (its library may be absent), and
    validated: ReleasesError naming the adapter and what is wrong."""
    SpecifierSet, Version, InvalidSpecifier, _ = _packaging()
    where = f"checks/adapters/{adapter}.py"
    if source is None:
        path = adapter_file(adapter)
        if not path.is_file():
            raise ReleasesError(f"no built-in adapter {adapter!r} ({where} does not exist)")
        source = path.read_text(encoding="utf-8")
    found = [node for node in ast.parse(source).body if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == DECLARATION for t in node.targets)]
    if len(found) != 1:
        raise ReleasesError(f"{where}: {'no' if not found else 'more than one'} top-level {DECLARATION} = {{...}} "
                            "(the releases whose API the adapter drives: distribution, range, why)")
    try:
        value = ast.literal_eval(found[0].value)
    except ValueError:
        raise ReleasesError(f"{where}: {DECLARATION} must be a literal dict (it is read without importing the adapter)") from None
    if not isinstance(value, dict):
        raise ReleasesError(f"{where}: {DECLARATION} is a {type(value).__name__}; expected a dict")
    unknown = sorted(set(value) - KEYS)
    if unknown:
        raise ReleasesError(f"{where}: {DECLARATION} has unknown key(s) {', '.join(map(repr, unknown))} (allowed: {', '.join(sorted(KEYS))})")
    for key in ("distribution", "range", "why"):
        if not isinstance(value.get(key), str) or not value[key].strip():
            raise ReleasesError(f"{where}: {DECLARATION}[{key!r}] must be a non-empty string")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value["distribution"]):
        raise ReleasesError(f"{where}: {DECLARATION}['distribution'] {value['distribution']!r} is not a distribution name")
    try:
        specifiers = SpecifierSet(value["range"])
    except InvalidSpecifier:
        raise ReleasesError(f"{where}: {DECLARATION}['range'] {value['range']!r} is not a PEP 440 specifier set (e.g. '>=2.0.0')") from None
    if not list(specifiers):
        raise ReleasesError(f"{where}: {DECLARATION}['range'] is empty: say which releases the adapter drives (e.g. '>=2.0.0')")
    companions = value.get("with", {})
    if not isinstance(companions, dict):
        raise ReleasesError(f"{where}: {DECLARATION}['with'] must be a dict of distribution -> specifier template")
    for name, template in companions.items():
        fields = set(re.findall(r"{(\w*)}", str(template)))
        if not isinstance(template, str) or not fields <= TEMPLATE_FIELDS:
            raise ReleasesError(f"{where}: {DECLARATION}['with'][{name!r}] = {template!r}: a specifier template with "
                                f"fields {sorted(TEMPLATE_FIELDS)} (e.g. '=={{major}}.{{minor}}.*')")
        try:
            SpecifierSet(template.format(major=1, minor=2, micro=3, version="1.2.3"))
        except InvalidSpecifier:
            raise ReleasesError(f"{where}: {DECLARATION}['with'][{name!r}] = {template!r} does not make a specifier") from None
    return Declaration(adapter, value["distribution"], str(specifiers), value["why"].strip(),
                       tuple(sorted((str(k), str(v)) for k, v in companions.items())))


def installed_outside(adapter: str) -> str | None:
    """In this interpreter: a sentence if the adapter's library is installed at a release outside its declared
    range (the matrix then reports the adapter as outside its range instead of running it), else None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        decl = declared(adapter)
        release = version(decl.distribution)
    except (ReleasesError, PackageNotFoundError):
        return None
    if decl.contains(release):
        return None
    return f"{decl.distribution} {release} is outside the releases the adapter drives ({decl.range}: {decl.why})"


# ------------------------------------------------------------------------------------------------
# which releases exist


def index_versions(distribution: str, python: str = sys.executable) -> list[str]:
    """The releases of ``distribution`` on the package index, oldest first (``pip index versions``: final releases
    only, yanked ones left out)."""
    done = subprocess.run([python, "-m", "pip", "index", "versions", distribution, "--disable-pip-version-check"],
                          capture_output=True, text=True, check=False, timeout=600)
    line = next((l for l in done.stdout.splitlines() if l.startswith("Available versions:")), None)
    if done.returncode != 0 or line is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise ReleasesError(f"cannot list the releases of {distribution}: pip index versions: {tail[0]}")
    return sort_versions([v.strip() for v in line.partition(":")[2].split(",") if v.strip()])


def sort_versions(versions) -> list[str]:
    _, Version, _, InvalidVersion = _packaging()

    def key(v):
        try:
            return (0, Version(v))
        except InvalidVersion:
            return (1, v)
    return sorted(dict.fromkeys(versions), key=key)


def is_final(release: str) -> bool:
    _, Version, _, InvalidVersion = _packaging()
    try:
        v = Version(release)
    except InvalidVersion:
        return False
    return not (v.is_prerelease or v.is_devrelease)


# ------------------------------------------------------------------------------------------------
# the plan: which cells, in which order


@dataclass
class Plan:
    adapters: dict[str, dict]  # adapter -> declaration + "releases" (in range, run) + "outside" (listed, not run)
    cells: list[tuple[str, str, str, int]]  # (adapter, release, profile, seed), in order

    def to_json(self) -> dict:
        return {"adapters": self.adapters, "cells": [list(c) for c in self.cells]}

    @classmethod
    def from_json(cls, data: dict) -> "Plan":
        return cls(data["adapters"], [(a, r, p, int(s)) for a, r, p, s in data["cells"]])


def make_plan(adapters: list[str], selection: str, profiles: list[str], seeds: list[int], *, versions=index_versions) -> Plan:
    """The cells of a run. ``selection``: ``all`` (every final release in range), ``latest`` (the newest in range)
    or comma-separated releases (each must exist; one outside the range is listed as outside, not run).
    ``versions(distribution)`` lists a distribution's releases (the package index; tests pass their own)."""
    selection = selection.strip()
    chosen = [v.strip() for v in selection.split(",") if v.strip()] if selection not in ("all", "latest") else []
    if chosen and len(adapters) != 1:
        raise ReleasesError(f"--releases {selection}: name one adapter with --adapters when choosing releases by number")
    plan_adapters, cells = {}, []
    for adapter in sorted(adapters):
        decl = declared(adapter)
        known = [v for v in versions(decl.distribution) if is_final(v)]
        if chosen:
            missing = [v for v in chosen if v not in known]
            if missing:
                raise ReleasesError(f"{decl.distribution} has no release {', '.join(missing)} on the index "
                                    f"(have: {', '.join(known[-8:])}{' ...' if len(known) > 8 else ''})")
            wanted = sort_versions(chosen)
        else:
            wanted = known
        in_range = [v for v in wanted if decl.contains(v)]
        outside = [v for v in wanted if not decl.contains(v)]
        if selection == "latest":
            in_range, outside = in_range[-1:], []
        plan_adapters[adapter] = {**decl.to_json(), "releases": in_range, "outside": outside}
        cells += [(adapter, release, profile, seed) for release in in_range for profile in profiles for seed in seeds]
    return Plan(plan_adapters, cells)


def parse_shard(text: str) -> tuple[int, int]:
    """``i/n`` with 1 <= i <= n."""
    found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not found or not 1 <= int(found.group(1)) <= int(found.group(2)):
        raise ReleasesError(f"--shard {text}: expected I/N with 1 <= I <= N (e.g. 2/4)")
    return int(found.group(1)), int(found.group(2))


def shard_cells(cells: list, index: int, count: int) -> list:
    """The ``index``-th (1-based) of ``count`` contiguous slices of ``cells``, sizes differing by at most one."""
    n = len(cells)
    return cells[(index - 1) * n // count: index * n // count]


# ------------------------------------------------------------------------------------------------
# environments


@dataclass
class Environment:
    python: str | None  # the interpreter, or None when the release could not be installed
    path: Path
    seconds: float
    packages: dict = field(default_factory=dict)  # name -> version, as installed
    reason: str = ""  # why not installable


def constraints_file(folder: Path, python: str = sys.executable) -> Path:
    """torch held at the build the machine has (a release that pins another one is not installable here: its CPU
    wheel is not on this machine and a CUDA build is several GB). numpy is left to the release's own pins."""
    done = subprocess.run([python, "-c", "import torch; print(torch.__version__.split('+')[0])"],
                          capture_output=True, text=True, check=False)
    torch_version = done.stdout.strip() or "2.13.0"
    path = Path(folder) / "constraints-releases.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"torch=={torch_version}\n", encoding="utf-8")
    return path


def _pip_reason(output: str) -> str:
    """The lines of pip's failure that say why, joined: the conflict (a release that pins another torch), a missing
    distribution, a failed build."""
    lines = [l.strip() for l in output.splitlines()]
    keep = [l for l in lines if l.startswith("ERROR:") or "depends on" in l or "requested (constraint)" in l
            or l.startswith("The user requested") or "No matching distribution" in l]
    keep = list(dict.fromkeys(l for l in keep if not l.startswith("ERROR: ResolutionImpossible")))
    text = "; ".join(keep[:6]) or (lines[-1] if lines else "pip failed")
    if re.search(r"depends on torch\b|torch[<>=!~]", text) and "constraint" in text:
        text = "pins a torch other than this machine's CPU build (" + text + ")"
    return text[:900]


def build_environment(decl: Declaration, release: str, *, envs: Path, constraints: Path, base_python: str,
                      root: Path = ROOT, log=None, keep: bool = False) -> Environment:
    """Create ENVS/ADAPTER-RELEASE and install the release, its companions and rlspec; reuse it when a previous
    ``--keep-envs`` run left it complete."""
    path = Path(envs) / f"{decl.adapter}-{release}"
    python = path / "bin" / "python"
    marker = path / ".rlspec-release"
    wanted = json.dumps({"requirements": decl.requirements(release), "root": str(root)})
    started = time.perf_counter()
    if marker.is_file() and marker.read_text(encoding="utf-8") == wanted and python.exists():
        return Environment(str(python), path, 0.0, _packages(str(python), decl))
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = []

    def step(command, env=None) -> bool:
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        out.append(f"$ {' '.join(map(str, command))}\n{done.stdout}{done.stderr}")
        return done.returncode == 0

    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-c", str(constraints)]
    script = Path(root) / ".ci" / "install" / f"{decl.adapter}.sh"
    # without pip of its own: the base interpreter's pip and setuptools (visible through the system site-packages) install
    # into it, and build rlspec without an isolated build environment
    ok = step([base_python, "-m", "venv", "--system-site-packages", "--without-pip", str(path)])
    if ok and script.is_file():  # the script installs the release (RLSPEC_RELEASE) and what its modules import
        ok = step(["bash", str(script), str(python), str(constraints)], env={**os.environ, "RLSPEC_RELEASE": release})
        if ok and decl.companions:
            ok = step(pip + decl.requirements(release)[1:])
    elif ok:
        ok = step(pip + decl.requirements(release))
    reason = "" if ok else _pip_reason(out[-1])
    if ok:
        ok = step(pip + ["--no-deps", "--no-build-isolation", "-e", str(root)])
        reason = "" if ok else "rlspec itself did not install: " + _pip_reason(out[-1])
    if log is not None:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        Path(log).write_text("\n".join(out), encoding="utf-8")
    seconds = round(time.perf_counter() - started, 1)
    if not ok:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)
        return Environment(None, path, seconds, reason=reason)
    packages = _packages(str(python), decl)
    if packages.get(decl.distribution) != release:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)
        return Environment(None, path, seconds, packages,
                           reason=f"pip installed {decl.distribution} {packages.get(decl.distribution)}, not {release}")
    marker.write_text(wanted, encoding="utf-8")
    return Environment(str(python), path, seconds, packages)


def _packages(python: str, decl: Declaration) -> dict:
    names = [decl.distribution] + [n for n, _ in decl.companions] + list(ENVIRONMENT_PACKAGES)
    code = ("import json, sys\nfrom importlib.metadata import version\nout = {}\nfor n in sys.argv[1:]:\n"
            "    try: out[n] = version(n).split('+')[0]\n    except Exception: pass\nprint(json.dumps(out))")
    done = subprocess.run([python, "-c", code, *dict.fromkeys(names)], capture_output=True, text=True, check=False)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}


# ------------------------------------------------------------------------------------------------
# running cells


def run_cells(plan: Plan, cells: list, *, envs: Path, base_python: str, keep_envs: bool = False, jobs: int = 1,
              run_adapter=None, build=None, say=print, time_limit: float | None = None, progress=None) -> list[dict]:
    """Run ``cells`` (a slice of ``plan.cells``): for each (adapter, release) build its environment once, run its
    (profile, seed) cells there, delete it. ``run_adapter(adapter, python, profile, seed) -> report`` and
    ``build(decl, release) -> Environment`` are the matrix's and :func:`build_environment` unless given (tests)."""
    from concurrent.futures import ThreadPoolExecutor

    from .. import matrix

    envs = Path(envs)
    if build is None:
        constraints = constraints_file(envs, base_python)

        def build(decl, release):
            return build_environment(decl, release, envs=envs, constraints=constraints, base_python=base_python,
                                     log=envs / "logs" / f"{decl.adapter}-{release}.log", keep=keep_envs)
    if run_adapter is None:
        def run_adapter(adapter, python, profile, seed):
            return matrix._run_elsewhere(adapter, python, profile, seed, time_limit)
    groups: dict[tuple[str, str], list] = {}
    for cell in cells:
        groups.setdefault(cell[:2], []).append(cell)

    def one(key) -> list[dict]:
        adapter, release = key
        decl = _declaration_of(plan, adapter)
        say(f"releases: {adapter} {release}: installing {' '.join(decl.requirements(release))}")
        env = build(decl, release)
        results = []
        if env.python is None:
            say(f"releases: {adapter} {release}: not installable here ({env.seconds:.0f} s): {env.reason}")
            return [_cell(c, "not-installable", reason=env.reason, packages=env.packages, install_seconds=env.seconds) for c in groups[key]]
        say(f"releases: {adapter} {release}: installed in {env.seconds:.0f} s")
        try:
            for cell in groups[key]:
                _, _, profile, seed = cell
                started = time.perf_counter()
                report = run_adapter(adapter, env.python, profile, seed)
                seconds = round(time.perf_counter() - started, 1)
                if report.get("available"):
                    status, reason = "checked", ""
                elif report.get("outside_range"):
                    status, reason = "outside-range", report.get("reason", "")
                else:
                    status, reason = "not-loadable", report.get("reason", "")
                report = {k: v for k, v in report.items() if k not in ("python", "seconds")}
                results.append(_cell(cell, status, reason=reason, packages=env.packages, install_seconds=env.seconds,
                                     run_seconds=seconds, report=report if status == "checked" else None))
                summary = ", ".join(f"{c['candidate']} {_counts(c['run']['summary'])}" for c in report.get("candidates", []))
                say(f"releases: {adapter} {release} {profile} seed {seed}: {status} in {seconds:.0f} s"
                    + (f": {summary}" if summary else f": {reason}"))
        finally:
            if not keep_envs:
                shutil.rmtree(env.path, ignore_errors=True)
        return results

    order = {c: i for i, c in enumerate(plan.cells)}
    finished: list[dict] = []

    def one_and_report(key) -> list[dict]:
        results = one(key)
        finished.extend(results)
        if progress is not None:  # e.g. the report so far, written after each release (a long run may be cut short)
            progress(sorted(finished, key=lambda r: order[_key(r)]))
        return results

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        done = list(pool.map(one_and_report, list(groups)))
    return sorted((r for group in done for r in group), key=lambda r: order[_key(r)])


def _counts(summary: dict) -> str:
    return "(" + ", ".join(f"{n} {s}" for s, n in summary.items() if n) + ")"


def _declaration_of(plan: Plan, adapter: str) -> Declaration:
    d = plan.adapters[adapter]
    return Declaration(adapter, d["distribution"], d["range"], d["why"], tuple(sorted(d.get("with", {}).items())))


def _cell(cell, status, *, reason="", packages=None, install_seconds=None, run_seconds=None, report=None) -> dict:
    adapter, release, profile, seed = cell
    out = {"adapter": adapter, "release": release, "profile": profile, "seed": seed, "status": status}
    if reason:
        out["reason"] = reason
    if report is not None:
        out["version"] = str((report.get("candidates") or [{}])[0].get("version") or "")
        out["report"] = report
    out["environment"] = packages or {}
    out["seconds"] = {"install": install_seconds, "run": run_seconds}
    return out


def _key(result: dict) -> tuple:
    return (result["adapter"], result["release"], result["profile"], int(result["seed"]))


# ------------------------------------------------------------------------------------------------
# reports: one per shard (or run), merged


def commit(root: Path = ROOT) -> str:
    """The checkout's commit (with ``+dirty`` when it has uncommitted changes), or '' outside git."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
        if head.returncode != 0:
            return ""
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=False).stdout.strip()
        return head.stdout.strip() + ("+dirty" if dirty else "")
    except OSError:
        return ""


def report(plan: Plan, results: list[dict], *, shard: tuple[int, int] | None, rlspec_commit: str, date: str | None = None,
           time_limit: float | None = None) -> dict:
    from ..runner.engine import VERSION

    return {"schema": SCHEMA, "kind": KIND, "rlspec": VERSION, "commit": rlspec_commit,
            "date": date or datetime.date.today().isoformat(), "shard": list(shard) if shard else None,
            "time_limit": time_limit, "plan": plan.to_json(), "cells": results}


def read_report(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReleasesError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ReleasesError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND or data.get("schema") != SCHEMA:
        raise ReleasesError(f"{path}: not a release-history report (rlspec matrix --releases ... --json writes one)")
    return data


def merge(reports: list[dict], names: list[str] | None = None) -> dict:
    """The shards' reports as the one report an unsharded run writes; ReleasesError when they are not the n
    slices of one plan run by one rlspec commit."""
    names = names or [f"report {i + 1}" for i in range(len(reports))]
    if not reports:
        raise ReleasesError("merge: no reports given")
    first = reports[0]
    for name, r in zip(names, reports):
        if r.get("incomplete"):
            raise ReleasesError(f"merge: {name} is the report of a run that did not finish (incomplete)")
        for key in ("plan", "commit", "rlspec", "time_limit"):
            if r.get(key) != first.get(key):
                raise ReleasesError(f"merge: {name} has another {key} than {names[0]} "
                                    "(shards must come from one plan and one rlspec commit)")
    shards = [tuple(r["shard"]) if r.get("shard") else (1, 1) for r in reports]
    counts = {n for _, n in shards}
    if len(counts) != 1:
        raise ReleasesError(f"merge: the reports are slices of different shard counts: {sorted(counts)}")
    count = counts.pop()
    seen = sorted(i for i, _ in shards)
    if seen != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(seen))
        doubled = sorted({i for i in seen if seen.count(i) > 1})
        raise ReleasesError("merge: " + "; ".join(filter(None, [
            f"missing shard(s) {', '.join(f'{i}/{count}' for i in missing)}" if missing else "",
            f"shard(s) given twice {', '.join(f'{i}/{count}' for i in doubled)}" if doubled else ""])))
    plan = Plan.from_json(first["plan"])
    cells = [c for r in reports for c in r["cells"]]
    keys = [_key(c) for c in cells]
    if sorted(keys) != sorted(plan.cells):
        raise ReleasesError(f"merge: the shards hold {len(keys)} cells, the plan {len(plan.cells)}")
    order = {c: i for i, c in enumerate(plan.cells)}
    dates = sorted(r.get("date", "") for r in reports)
    return {**{k: first[k] for k in ("schema", "kind", "rlspec", "commit")}, "date": dates[-1], "shard": None,
            "time_limit": first.get("time_limit"), "plan": first["plan"], "cells": sorted(cells, key=lambda c: order[_key(c)])}


def comparable(data):
    """A report without its timings and date: what must be equal between a merged and an unsharded run."""
    if isinstance(data, dict):
        return {k: comparable(v) for k, v in data.items() if k not in ("seconds", "date")}
    if isinstance(data, list):
        return [comparable(v) for v in data]
    return data


# ------------------------------------------------------------------------------------------------
# the history: records per (adapter, version) and each adapter's index of releases


def write_history(data: dict, folder: Path, today: str | None = None) -> list[Path]:
    """Write a (merged or unsharded) report into ``folder`` (docs/matrix-history): one record per checked cell
    (``history.write_record``) and, per adapter, ``releases.json``: every release tried and what became of it,
    with the declared range. Releases of earlier runs that this one did not touch are kept."""
    from . import history

    folder = Path(folder)
    today = today or data.get("date")
    written = []
    plan = data["plan"]
    for adapter, info in plan["adapters"].items():
        index_path = folder / adapter / INDEX
        index = _read_index(index_path)
        entries = index.get("releases", {})
        for release in info.get("outside", []):
            for run in (entries.get(release, {}).get("runs") or {}).values():  # checked under an older, wider range
                stale = folder / adapter / run.get("file", "")
                if run.get("file") and stale.is_file():
                    stale.unlink()
                    written.append(stale)
            entries[release] = {"status": "outside-range", "reason": f"outside the declared range {info['range']}: {info['why']}"}
        for cell in (c for c in data["cells"] if c["adapter"] == adapter):
            entry = entries.get(cell["release"], {})
            if entry.get("status") not in ("checked",) or cell["status"] == "checked":
                entry = {k: v for k, v in entry.items() if k in ("runs",)}
                entry.update({"status": cell["status"], "environment": cell.get("environment", {}),
                              "install_seconds": (cell.get("seconds") or {}).get("install")})
                if cell.get("reason"):
                    entry["reason"] = cell["reason"]
            if cell["status"] == "checked":
                entry["version"] = cell["version"]
                path = history.write_record(folder, cell["report"], rlspec=data.get("rlspec"), profile=cell["profile"],
                                            seed=cell["seed"], commit=data.get("commit"), today=today,
                                            extra={"release": cell["release"], "environment": cell.get("environment", {}),
                                                   "time_limit": data.get("time_limit")})
                if path is not None:
                    written.append(path)
                runs = entry.setdefault("runs", {})
                runs[f"{cell['profile']}/seed{cell['seed']}"] = {
                    "file": history.record_name(cell["version"], cell["profile"], cell["seed"]),
                    "run_seconds": (cell.get("seconds") or {}).get("run"),
                    "summary": {c["candidate"]: c["run"]["summary"] for c in cell["report"].get("candidates", [])},
                }
            entries[cell["release"]] = entry
        index = {"schema": SCHEMA, "adapter": adapter, "distribution": info["distribution"], "range": info["range"],
                 "why": info["why"], "with": info.get("with", {}),
                 "releases": {r: entries[r] for r in sort_versions(entries)}}
        index_path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(index, indent=1) + "\n"
        if not index_path.is_file() or index_path.read_text(encoding="utf-8") != text:
            index_path.write_text(text, encoding="utf-8")
            written.append(index_path)
    return written


def _read_index(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return {}


def load_indexes(folder: Path) -> dict[str, dict]:
    """adapter -> its ``releases.json`` (``{}`` where none was written)."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    return {p.parent.name: _read_index(p) for p in sorted(folder.glob(f"*/{INDEX}"))}


# ------------------------------------------------------------------------------------------------
# command line (``rlspec matrix --releases`` and ``rlspec matrix merge``; checks/matrix/__init__.py parses the arguments)


def profiles_of(text: str) -> list[str]:
    from ..runner.engine import PROFILES

    names = [p.strip() for p in str(text).split(",") if p.strip()]
    bad = [p for p in names if p not in PROFILES]
    if not names or bad:
        raise ReleasesError(f"--profile {text}: each must be one of {', '.join(PROFILES)}")
    return list(dict.fromkeys(names))


def seeds_of(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in str(text).split(",") if s.strip()]
    except ValueError:
        raise ReleasesError(f"--seed {text}: a number, or numbers separated by commas") from None
    if not seeds:
        raise ReleasesError(f"--seed {text}: a number, or numbers separated by commas")
    return list(dict.fromkeys(seeds))


def run(args, chosen: list[str]) -> int:
    """``rlspec matrix --releases SELECTION [--shard I/N] [--json FILE]``."""
    base = args.base_python or getattr(sys, "_base_executable", None) or sys.executable
    try:
        shard = parse_shard(args.shard) if args.shard else None
        if shard and not args.json:
            raise ReleasesError("--shard writes its report with --json FILE (merge the shards with `rlspec matrix merge`)")
        plan = make_plan(chosen, args.releases, profiles_of(args.profile), seeds_of(args.seed),
                         versions=lambda d: index_versions(d, base))
    except ReleasesError as exc:
        print(f"rlspec: {exc}", file=sys.stderr)
        return 2
    for adapter, info in plan.adapters.items():
        outside = f"; outside the range, not run: {len(info['outside'])}" if info["outside"] else ""
        print(f"releases: {adapter}: {info['distribution']} {info['range']}: {len(info['releases'])} release(s) in range "
              f"({', '.join(info['releases'])}){outside}", flush=True)
    cells = shard_cells(plan.cells, *shard) if shard else plan.cells
    print(f"releases: {len(cells)} of {len(plan.cells)} cell(s)" + (f" (shard {shard[0]}/{shard[1]})" if shard else ""), flush=True)
    if args.list:
        for cell in cells:
            print("  " + " ".join(map(str, cell)))
        return 0
    envs = Path(args.envs) if args.envs else Path(tempfile.gettempdir()) / "rlspec-release-envs"
    started = time.perf_counter()

    def progress(so_far):
        if args.json:  # the report so far, marked incomplete (merge refuses it)
            partial = {**report(plan, so_far, shard=shard, rlspec_commit=commit(), time_limit=args.time_limit), "incomplete": True}
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(partial, indent=1) + "\n", encoding="utf-8")

    results = run_cells(plan, cells, envs=envs, base_python=base, keep_envs=args.keep_envs, jobs=args.jobs,
                        say=lambda line: print(line, flush=True), time_limit=args.time_limit, progress=progress)
    data = report(plan, results, shard=shard, rlspec_commit=commit(), time_limit=args.time_limit)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    if not shard:
        _write(data, Path(args.out))
    print(f"releases: {len(cells)} cell(s) in {time.perf_counter() - started:.0f} s: "
          + ", ".join(f"{n} {s}" for s, n in _tally(results).items()))
    return 0


def run_merge(args) -> int:
    """``rlspec matrix merge REPORT ... [--json FILE] [--out DIR]``."""
    if not args.reports:
        print("rlspec: matrix merge takes the shards' reports (rlspec matrix --releases ... --shard I/N --json FILE)", file=sys.stderr)
        return 2
    try:
        data = merge([read_report(Path(p)) for p in args.reports], names=list(args.reports))
    except ReleasesError as exc:
        print(f"rlspec: {exc}", file=sys.stderr)
        return 2
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    _write(data, Path(args.out))
    print(f"merged {len(args.reports)} report(s): {len(data['cells'])} cell(s): "
          + ", ".join(f"{n} {s}" for s, n in _tally(data["cells"]).items()))
    return 0


def _write(data: dict, out: Path) -> None:
    from . import history

    written = write_history(data, out / history.FOLDER)
    print(f"wrote {len(written)} history file(s) in {out / history.FOLDER}")


def _tally(cells: list[dict]) -> dict:
    out: dict[str, int] = {}
    for c in cells:
        out[c["status"]] = out.get(c["status"], 0) + 1
    return out

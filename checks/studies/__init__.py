"""Studies: the source chapter's experiments, run on the suite's gridworld with their claims checked.

``rlspec study NAME [--candidate SPEC] [--seeds N] [--out DIR]``; ``rlspec study --list``. Each
study is one module here with

    NAME, TITLE, ILLUSTRATES      the study's name, a one-line title, {"chapter", "clauses"} it illustrates
    SOURCES                       the published work its claims come from
    OPERATIONS                    the protocol operations a candidate may supply (the rest is the reference's)
    SEEDS, MIN_SEEDS, SIZES       replicates and experiment sizes ("default" for the command line, "small" for tests)
    measure(ops, seeds, size)     the experiment: JSON-ready measurements of one subject
    claims(m)                     the claims as code: measurements in, Claim (with its criterion) out
    table(by_subject)             the table; figure(by_subject, path) the PNG (matplotlib, imported there)

A candidate that provides a study's operations is studied beside the reference ("candidate" and
"reference" subjects, the claims judged on the candidate's run); one that provides none of them
gets the reference's run and a note saying so. Claims that do not hold are reported as measured:
no study is tuned until it agrees. A claim that does not hold on the reference's own run is *refuted*, a
finding about the published claim on rlspec's MDP; one that holds there but not on a candidate's run is the
candidate's difference. Only the second makes ``rlspec study`` exit 1.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from ._core import CANDIDATE_DIFFERS, DEFAULT, HOLDS, REFUTED, SMALL, Claim, StudyError, StudyResult, Table, quiet_torch

NAMES = ("clip-fraction", "baseline-ablation", "kl-penalty-vs-clip", "lambda-bake-off", "explained-variance", "stale-logp-old")


def module(name: str) -> ModuleType:
    if name not in NAMES:
        import difflib

        near = difflib.get_close_matches(name, NAMES, n=1)
        raise StudyError(f"no study {name!r}" + (f"; did you mean {near[0]!r}?" if near else f"; studies: {', '.join(NAMES)}"))
    return importlib.import_module(f"{__name__}.{name.replace('-', '_')}")


def studies() -> list[ModuleType]:
    return [module(n) for n in NAMES]


def _reference_ops(names) -> dict:
    from ..runner import reference_candidate

    return {op: getattr(reference_candidate, op) for op in names}


def run(name: str, candidate=None, seeds: int | None = None, size: str = DEFAULT, out: str | Path | None = None) -> StudyResult:
    """Run one study; with ``out``, write ``OUT/NAME.json`` and ``OUT/NAME.png`` (needs matplotlib).

    ``candidate``: a loaded :class:`~rlspec.checks.runner.protocol.Candidate` (None: the reference).
    """
    study = module(name)
    if size not in study.SIZES:
        raise StudyError(f"unknown size {size!r}; use {', '.join(study.SIZES)}")
    seeds = study.SEEDS[size] if seeds is None else int(seeds)
    if seeds < study.MIN_SEEDS:
        raise StudyError(f"needs --seeds >= {study.MIN_SEEDS} (its tests could not reject the claim with fewer: "
                         f"the smallest sign-flip p-value with n seeds is 2^-n)")
    reference_ops = _reference_ops(study.OPERATIONS)
    spec = "reference" if candidate is None else candidate.spec
    provided = {} if candidate is None or candidate.spec == "reference" else {
        op: candidate.operations[op] for op in study.OPERATIONS if candidate.provides(op)}
    notes = []
    if candidate is not None and spec != "reference" and not provided:
        notes.append(f"the candidate provides none of {', '.join(study.OPERATIONS) or 'the operations'} this study uses: the reference's run is shown"
                     if study.OPERATIONS else "this study measures the reference's estimator exactly; it uses no candidate operation")
    parameters = study.SIZES[size]
    by_subject = {}
    with quiet_torch():
        if provided:
            by_subject["candidate"] = study.measure({**reference_ops, **provided}, seeds, parameters)
        by_subject["reference"] = study.measure(reference_ops, seeds, parameters)
    judged = "candidate" if provided else "reference"
    on_reference = {c.id: c.holds for c in study.claims(by_subject["reference"])}
    verdict = lambda c: HOLDS if c.holds else (REFUTED if not on_reference.get(c.id, False) else CANDIDATE_DIFFERS)
    claims = [Claim(**{**vars(c), "id": c.id if subject == judged else f"reference:{c.id}", "verdict": verdict(c)})
              for subject in ([judged] + (["reference"] if provided else [])) for c in study.claims(by_subject[subject])]
    result = StudyResult(
        study=name, title=study.TITLE, illustrates=study.ILLUSTRATES, sources=list(study.SOURCES), candidate=spec,
        operations={op: ("candidate" if op in provided else "reference") for op in study.OPERATIONS},
        seeds=seeds, size=size, settings={"seeds": list(range(seeds)), **study.settings(parameters)},
        table=study.table(by_subject), claims=claims, data=by_subject, notes=notes + list(getattr(study, "NOTES", ())),
    )
    if out is not None:
        write(result, study, by_subject, Path(out))
    return result


def write(result: StudyResult, study: ModuleType, by_subject: dict, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{result.study}.png"
    study.figure(by_subject, png, claims=[c for c in result.claims if not c.id.startswith("reference:")])
    result.figure = png.name
    path = out / f"{result.study}.json"
    path.write_text(result.to_json(), encoding="utf-8")
    return [path, png]


__all__ = ["NAMES", "DEFAULT", "SMALL", "HOLDS", "REFUTED", "CANDIDATE_DIFFERS", "Claim", "StudyError", "StudyResult", "Table",
           "module", "run", "studies"]

"""The known mistakes a likely cause rests on (checks/wrong_answers.json) are the mutant catalogue's, and the
README's sample outputs are what real runs print today."""

from __future__ import annotations

from conftest import ROOT
from rlspec.checks import readme_samples, signatures


def test_the_shipped_wrong_answers_are_the_mutant_catalogues():
    """Regenerate with `python -m rlspec.checks.signatures tests/mutants > checks/wrong_answers.json`."""
    fresh = signatures.dumps(signatures.generate(ROOT / "tests" / "mutants"))
    assert signatures.DATA.read_text(encoding="utf-8") == fresh, "checks/wrong_answers.json is stale"


def test_a_mutants_cause_is_the_first_sentence_of_its_docstring():
    assert signatures.cause_of("Mutant: a time-limit truncation is treated as a terminal state (bug B4; CleanRL's x). "
                               "More.") == "a time-limit truncation is treated as a terminal state"


def test_the_readme_samples_are_what_real_runs_print():
    """Regenerate with `python -m rlspec.checks.readme_samples README.md`."""
    shown = readme_samples.blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert set(shown) == set(readme_samples.SAMPLES)
    for name in readme_samples.SAMPLES:
        assert readme_samples.masked(shown[name]) == readme_samples.masked(readme_samples.render(name)), name

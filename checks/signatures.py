"""``python -m rlspec.checks.signatures tests/mutants > checks/wrong_answers.json``: the command the docs and the
regeneration scripts run. The module lives in the runner (:mod:`rlspec.checks.runner.signatures`); this name is
kept so that command and ``from rlspec.checks import signatures`` keep working."""

from .runner.signatures import *  # noqa: F401,F403 - the compatibility name
from .runner.signatures import DATA, explain, generate, main, within_lower_precision  # noqa: F401

if __name__ == "__main__":
    main()

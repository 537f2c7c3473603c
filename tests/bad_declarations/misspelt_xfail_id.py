"""Bad declaration: an xfail id that names no clause (a typo of GAE-TRUNCATION-BOOTSTRAP): the deviation the
user meant to declare would silently stay undeclared."""

from rlspec.reference.gae import gae  # noqa: F401 - the operation under test

RLSPEC_XFAIL = {"GAE-TRUNCATION-BOOTSRAP": "truncation is terminal by design, https://example.org/issue/1"}

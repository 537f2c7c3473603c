"""Known-answer vectors: the executable spec written out as data any language can run.

``rlspec vectors OUT/`` writes, deterministically, one JSON file per operation (inputs, expected outputs,
expected gradients of the losses, the tolerance of every element for a float64 and a float32
implementation, the clauses the case belongs to, the conventions it assumes, and ``flags``: the named
bugs of rlspec's mutant catalogue that the case catches, found by running every mutant on it) plus a
``manifest.json`` that lists every file with its case count and SHA-256. ``rlspec check --vectors DIR``
runs a Python candidate on them; docs/vectors.md says how another language does.

Where the cases come from: the contract's known answers, and the fixed inputs the clause checks themselves
pass the reference (recorded through :meth:`Context.call`; the examples a property *draws* are left out, so
that the set depends on the catalogue alone, never on an example budget, a core count or how a search went
on one machine), reduced to the few
that catch every mutant a vector of that operation can catch (a greedy cover), every input rounded to
float32 so that one case serves both precisions. Expected values are the reference's float64 outputs;
each element's tolerance is the chapter's own derived bound (the same functions the clause checks use),
evaluated at the unit roundoff of float64 and of float32.

One rule for every element: ``low - tol <= actual <= high + tol``, where ``low = high = expected`` except
at a kink (a clip boundary), where [low, high] spans the one-sided derivatives. ``null`` means the element
is not compared (an output at a masked position); a string ``"nan"``/``"inf"``/``"-inf"`` is that IEEE value,
and an expected NaN is met only by NaN.

The package, by seam: :mod:`.format` (a case, its bounds, the JSON written and read back), :mod:`.rules` (each
operation's expected outputs and tolerances), :mod:`.generate` (the cases, their flags, the files),
:mod:`.run` (an implementation run on the cases, ``rlspec check --vectors``) and :mod:`.compare` (two sets
compared across machines). A product of the suite: it may import the runner, the chapters (their oracles and
tolerances), the kit, ``rlspec.spec`` and ``rlspec.reference``; only the front ends import it.
"""

from .compare import SAME_SET_ULPS, differences
from .format import FORMAT, SCHEMA, VERSION, Bound, Case, VectorError, case_from_json, case_json, dumps, read
from .generate import ROOT, case_name, generate
from .rules import RULES, VECTOR_OPERATIONS
from .run import VectorResult, evaluate, judge, run, run_case, run_isolated

__all__ = ["FORMAT", "RULES", "ROOT", "SAME_SET_ULPS", "SCHEMA", "VECTOR_OPERATIONS", "VERSION", "Bound", "Case", "VectorError",
           "VectorResult", "case_from_json", "case_json", "case_name", "differences", "dumps", "evaluate", "generate", "judge",
           "read", "run", "run_case", "run_isolated"]

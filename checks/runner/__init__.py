"""The runner: loads a candidate (:mod:`.loader`), calls its operations under the protocol (:mod:`.protocol`:
conversion, copies, captured output, restored global state), runs every registered check in a
:class:`~.verdict.Context` and turns its outcome into a verdict (:mod:`.verdict`, :mod:`.signatures` for the
likely cause), in killable worker processes (:mod:`.worker`, :mod:`.lifetime`) driven by :mod:`.engine`
(``run_conformance``); :mod:`.reference_candidate` is the reference as a candidate, :mod:`.config` the
``[tool.rlspec]`` settings and :mod:`.chapters` imports the chapters. It may import the chapters
(``rlspec.checks.clauses``), the kit, ``rlspec.spec`` and ``rlspec.reference``; the chapters never import it
(they see ``ctx`` through :mod:`rlspec.checks.kit.context`), and nothing below the products and front ends
does.
"""

"""Every word of the contract is checked (issue 26, part 1).

Each operation's meaning lists its promises (``promises`` of its ``[[operation]]`` in spec/contract/), each
quoting the meaning's words and naming the clauses that fail a candidate that breaks it. "Complete" is made
testable by the vocabulary of promise kinds (``[[promise_kind]]`` in spec/contract/00_candidate.toml): wherever
a kind's words match a meaning, a promise of that kind quotes them. So a meaning that says "without gradient",
"terminated wins", "detached" or "kl(x) <= max_kl" cannot go without a clause that checks it.
"""

from __future__ import annotations

import pytest

from rlspec.checks import contract_docs
from rlspec.spec import catalogue, contract

OPERATIONS = list(contract.operations().values())


def _span(meaning: str, says: str) -> tuple[int, int]:
    start = meaning.index(says)
    return start, start + len(says)


@pytest.mark.parametrize("op", OPERATIONS, ids=[op.name for op in OPERATIONS])
def test_every_promise_word_of_a_meaning_is_quoted_by_a_promise_of_its_kind(op):
    uncovered = []
    for kind in contract.promise_kinds().values():
        for start, end in kind.matches(op.meaning):
            spans = [_span(op.meaning, p.says) for p in op.promises if kind.name in p.kinds]
            if not any(a <= start and end <= b for a, b in spans):
                uncovered.append(f"{kind.name}: ...{op.meaning[max(0, start - 30):end + 30]}...")
    assert not uncovered, f"{op.name}: words of its meaning that no promise of their kind quotes: {uncovered}"


@pytest.mark.parametrize("op", OPERATIONS, ids=[op.name for op in OPERATIONS])
def test_every_operation_promises_a_value_and_every_promise_names_its_keeper(op):
    assert any("value" in p.kinds for p in op.promises), f"{op.name} promises no value"
    clauses = {c.id: c for c in catalogue.clauses()}
    for promise in op.promises:
        assert promise.clauses or promise.by in contract.ENFORCERS, promise
        for clause_id in promise.clauses:
            assert clause_id in clauses, f"{op.name}: {promise.says!r} names {clause_id}, which is no clause"
            assert op.name in clauses[clause_id].operations, f"{op.name}: {promise.says!r} names {clause_id}, a clause of {clauses[clause_id].operations}"


def test_every_clause_keeps_a_promise():
    named = {c for p in contract.promises() for c in p.clauses}
    missing = sorted(c.id for c in catalogue.clauses() if c.id not in named)
    assert not missing, f"clauses no promise of the contract names (say which promise they keep): {missing}"


def test_candidate_level_promises_name_clauses_that_exist():
    clauses = {c.id for c in catalogue.clauses()}
    for promise in contract.load().promises:
        assert promise.by in contract.ENFORCERS and set(promise.clauses) <= clauses, promise


def test_every_kind_is_used():
    used = {k for p in contract.promises() for k in p.kinds}
    assert set(contract.promise_kinds()) == used, set(contract.promise_kinds()) - used


@pytest.mark.parametrize("raw, message", [
    ({"says": "When both flags are set, truncated wins", "kinds": ["precedence"], "clauses": ["GAE-TERMINAL-NO-BOOTSTRAP"]},
     "does not quote the meaning"),
    ({"says": "terminated wins", "kinds": ["precedense"], "clauses": ["GAE-TERMINAL-NO-BOOTSTRAP"]}, "did you mean 'precedence'"),
    ({"says": "terminated wins", "kinds": ["precedence"]}, "names the clauses that keep it"),
    ({"says": "terminated wins", "kinds": ["precedence"], "clauses": ["GAE-TERMINAL-NO-BOOTSTRAP"], "by": "suite"}, "names the clauses"),
    ({"says": "terminated wins", "kinds": ["precedence"], "by": "nobody"}, "names the clauses"),
])
def test_a_malformed_promise_is_refused(raw, message):
    # the parser the loader uses, on the real vocabulary (no reload: protocol.OPERATIONS keeps the loaded contract)
    with pytest.raises(contract.ContractError, match=message):
        contract._promise(raw, contract.promise_kinds(), "10_gae.toml", contract.operations()["gae"].meaning)


def test_docs_list_every_promise():
    text = contract_docs.markdown()
    for op in OPERATIONS:
        for promise in op.promises:
            assert f'"{promise.says}"' in text, (op.name, promise.says)

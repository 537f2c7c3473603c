"""The contract (spec/contract/*.toml): one home for the operations, the conventions and what a candidate
may declare. Declarations are validated once, at load, with messages pinned here (tests/bad_declarations/
holds one fixture per case); checks read conventions through one accessor, and the contract says exactly
which clauses read which key; the README's protocol table and docs/contract.md are generated from it."""

from __future__ import annotations

import ast
import re
from fractions import Fraction
from pathlib import Path

import pytest

from conftest import REPEAT, ROOT
from rlspec.checks import load, run_conformance
from rlspec.checks import contract_docs
from rlspec.checks.cli import main
from rlspec.checks.runner.loader import LoadError
from rlspec.checks.runner.protocol import OPERATIONS, Candidate
from rlspec.spec import catalogue, contract
from rlspec.spec.contract import ContractError

BAD = ROOT / "tests" / "bad_declarations"
KNOWN = ", ".join(sorted(contract.conventions()))


# ------------------------------------------------------------------------------------------------
# the data


def test_the_contract_loads_and_the_protocol_reads_it():
    c = contract.load()
    # equal, not identical: tests below load a replaced contract and clear the cache, after which load() builds a
    # new (equal) object, so identity would depend on the order the tests ran in
    assert c.version >= 1 and OPERATIONS == c.operations
    assert len(c.operations) >= 27 and len(c.conventions) >= 27
    chapters = {ch.name for ch in catalogue.chapters()}
    assert {op.chapter for op in c.operations.values()} <= chapters
    assert {k.chapter for k in c.conventions.values()} <= chapters


def test_every_clause_exercises_contract_operations():
    for clause in catalogue.clauses():
        assert set(clause.operations) <= set(OPERATIONS), clause.id


def test_signatures_are_written_from_the_arguments():
    assert OPERATIONS["gae"].signature == "(rewards, values, next_values, terminated, truncated, gamma, lam) -> (advantages, returns)"
    assert OPERATIONS["aggregate_loss"].signature == "(per_token_loss, mask, mode, num_tokens=None, norm_length=None) -> loss"
    assert OPERATIONS["ppo_clip_loss"].differentiated == ("logp_new",) and OPERATIONS["ppo_clip_loss"].arrays == "torch"


def test_each_conventions_clauses_exist_and_use_its_operations():
    ids = {c.id: c for c in catalogue.clauses()}
    for k in contract.conventions().values():
        assert k.clauses, f"{k.key} affects no clause"
        for clause_id in k.clauses:
            assert clause_id in ids, f"{k.key}: no clause {clause_id}"


def test_a_malformed_contract_file_is_refused(tmp_path, monkeypatch):
    (tmp_path / "00_x.toml").write_text('[contract]\nversion = 1\n[[convention]]\nkey = "k"\ntype = "number"\n'
                                        'meaning = "m"\noperations = []\n')
    monkeypatch.setattr(contract, "CONTRACT_DIR", tmp_path)
    contract.load.cache_clear()
    try:
        with pytest.raises(ContractError, match="a number convention has a default or is nullable"):
            contract.load()
    finally:
        monkeypatch.undo()
        contract.load.cache_clear()


# ------------------------------------------------------------------------------------------------
# one accessor: every key a check reads is in the contract, every contract key is read, and the
# contract's `clauses` list says exactly which clauses read it


def test_checks_read_conventions_only_through_the_context():
    """The clause checks never touch the declared dict (the engine and the matrix only report it)."""
    for path in sorted((ROOT / "checks" / "clauses").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "candidate.conventions" not in text and ".conventions.get(" not in text, path


def test_every_convention_key_written_in_a_check_is_a_contract_key():
    read = set()
    for path in sorted((ROOT / "checks" / "clauses").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("convention", "provided", "default") \
                    and node.args and isinstance(node.args[0], ast.Constant):
                read.add(node.args[0].value)
    assert read <= set(contract.conventions()), read - set(contract.conventions())


@pytest.fixture(scope="module")
def reference_run():
    return run_conformance(load("reference"))


@REPEAT  # the fixture's run is tests/test_reference.py's traced float64 seed-0 run again: untraced here
def test_the_contract_lists_exactly_the_clauses_that_read_each_key(reference_run):
    read: dict[str, set[str]] = {}
    for result in reference_run.results:
        for key in result.conventions:
            read.setdefault(key, set()).add(result.id)
    assert set(read) == set(contract.conventions()), "contract keys no check reads: " \
        f"{sorted(set(contract.conventions()) - set(read))}"
    for key, spec in contract.conventions().items():
        assert set(spec.clauses) == read[key], f"{key}: the contract says {sorted(spec.clauses)}, checks read it in {sorted(read[key])}"


@REPEAT
def test_a_verdict_says_the_conventions_it_was_judged_under(reference_run):
    result = reference_run["PPO-ADVANTAGE-NORMALISATION"]
    assert result.conventions == {"advantage_std_ddof": 1, "advantage_eps": 1e-8, "advantage_eps_form": "std"}
    assert "conventions" not in reference_run["GAE-SEED-EXAMPLE"].to_json()


# ------------------------------------------------------------------------------------------------
# validation: each kind of convention


@pytest.mark.parametrize("key, value, normalised", [
    ("advantage_std_ddof", 0, 0),
    ("critic_loss_factor", 0.5, 0.5),
    ("dual_clip", None, None),
    ("dual_clip", 3, 3),
    ("kl_estimate_kinds", ["k3", "k1"], ("k1", "k3")),
    ("group_singleton", {"rloo": "zero", "grpo": "score"}, (("grpo", "score"), ("rloo", "zero"))),
    ("group_singleton", "score", "score"),
    ("backtrack_factor", 0.8, 0.8),
])
def test_allowed_values_are_accepted_and_normalised(key, value, normalised):
    assert contract.validate_conventions({key: value}) == {key: normalised}
    assert contract.validate_conventions(contract.validate_conventions({key: value})) == {key: normalised}


@pytest.mark.parametrize("key, value", [
    ("advantage_std_ddof", True),  # a bool is not the integer 1
    ("advantage_std_ddof", 2),
    ("critic_loss_factor", 2.0),
    ("value_loss_factor", -1.0),
    ("value_loss_factor", float("nan")),
    ("damping", float("inf")),
    ("backtrack_factor", 1.0),  # exclusive maximum
    ("kl_adaptive_factor", 1),  # exclusive minimum
    ("log_ratio_clamp", 0.0),
    ("kl_estimate_kinds", "k1"),  # a string is not a list of kinds
    ("kl_estimate_kinds", []),
    ("kl_penalty_kinds", ["k3", "k4"]),
    ("group_singleton", {"ppo": "score"}),
    ("group_singleton", {}),
    ("advantage_eps_form", "STD"),
])
def test_values_outside_the_contract_are_refused(key, value):
    with pytest.raises(ContractError, match=rf"RLSPEC_CONVENTIONS\['{key}'\] = .* is not allowed; {key} takes "):
        contract.validate_conventions({key: value})


def test_a_candidate_made_directly_is_validated_too():
    with pytest.raises(ContractError, match="advantage_std_ddof takes 1 or 0"):
        Candidate(spec="x", name="x", operations={}, conventions={"advantage_std_ddof": 7})
    with pytest.raises(ContractError, match="xfail entry GAE-NO-SUCH matches no clause"):
        Candidate(spec="x", name="x", operations={}, xfail={"gae-no-such": "typo"})


# ------------------------------------------------------------------------------------------------
# the messages a user sees: one line, exit 2, the name, what is allowed, the nearest valid one


MESSAGES = [
    ("misspelt_convention",
     "candidate '{path}': RLSPEC_CONVENTIONS['advantage_std_dof']: no such convention; did you mean "
     f"'advantage_std_ddof'? (known: {KNOWN})"),
    ("impossible_convention_value",
     "candidate '{path}': RLSPEC_CONVENTIONS['advantage_std_ddof'] = 7 is not allowed; advantage_std_ddof takes 1 or 0"),
    ("misspelt_declaration",
     "candidate '{path}': RLSPEC_CONVENTION: rlspec declares no such name; did you mean 'RLSPEC_CONVENTIONS'? "
     f"(known: {', '.join(sorted(contract.declarations()))})"),
    ("unknown_array_kind",
     "candidate '{path}': RLSPEC_ARRAY = 'tensorflow' is not allowed; expected one of 'numpy', 'torch', 'jax'"),
    ("misspelt_xfail_id",
     "candidate '{path}': RLSPEC_XFAIL: xfail entry GAE-TRUNCATION-BOOTSRAP matches no clause; did you mean "
     "'GAE-TRUNCATION-BOOTSTRAP'?"),
]


@pytest.mark.parametrize("fixture, message", MESSAGES, ids=[m[0] for m in MESSAGES])
def test_a_bad_declaration_is_exit_2_with_one_line_that_names_it(fixture, message, capsys):
    path = str(BAD / f"{fixture}.py")
    for isolation in ([], ["--no-isolation"]):
        assert main(["check", "--candidate", path, *isolation]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == f"rlspec: {message.format(path=path)}\n"


@pytest.mark.parametrize("fixture", [m[0] for m in MESSAGES])
def test_a_bad_declaration_is_a_load_error_in_the_api(fixture):
    with pytest.raises(LoadError):
        load(str(BAD / f"{fixture}.py"))


def test_every_bad_declaration_fixture_is_pinned():
    assert {p.stem for p in BAD.glob("*.py")} == {m[0] for m in MESSAGES}


def test_a_misspelt_id_in_an_xfail_file_is_exit_2(capsys):
    path = BAD / "misspelt.xfail"
    assert main(["check", "--xfail", str(path)]) == 2
    assert capsys.readouterr().err == (f"rlspec: --xfail {path}: xfail entry GAE-SEED-EXAMPLE-TRUNCATD matches no "
                                       "clause; did you mean 'GAE-SEED-EXAMPLE-TRUNCATED'?\n")


def test_a_misspelt_id_in_an_xfail_dict_is_refused():
    with pytest.raises(Exception, match="xfail entry GAE-SEED-EXAMPL matches no clause; did you mean 'GAE-SEED-EXAMPLE'"):
        run_conformance("reference", clauses="GAE-SEED-EXAMPLE", xfail={"GAE-SEED-EXAMPL": "typo"})


def test_the_header_and_the_report_carry_the_declared_conventions(capsys, tmp_path):
    report = tmp_path / "r.json"
    variant = str(ROOT / "tests" / "variants" / "kl_torch_new_old_order.py")
    assert main(["check", "--candidate", variant, "--only", "KL-DIRECTION", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1] == "  conventions: kl_estimate_arguments = 'other, sampler'"
    import json

    data = json.loads(report.read_text())
    assert data["conventions"] == {"kl_estimate_arguments": "other, sampler"}
    assert data["clauses"][0]["conventions"]["kl_estimate_arguments"] == "other, sampler"


def test_explain_lists_the_conventions_that_affect_a_clause(capsys):
    assert main(["explain", "PPO-ADVANTAGE-NORMALISATION"]) == 0
    out = capsys.readouterr().out
    assert "conventions (RLSPEC_CONVENTIONS) that affect it:" in out and "advantage_std_ddof: 1 or 0; default 1." in out


# ------------------------------------------------------------------------------------------------
# generated documents stay fresh


def _readme_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = text.index(contract_docs.README_BEGIN), text.index(contract_docs.README_END)
    return text[start:end + len(contract_docs.README_END)]


def test_the_readme_protocol_table_is_generated_and_fresh():
    assert _readme_block() == contract_docs.readme_table(), "regenerate: rlspec contract --format readme"


def test_docs_contract_md_is_generated_and_fresh():
    assert (ROOT / "docs" / "contract.md").read_text(encoding="utf-8") == contract_docs.markdown() + "\n", \
        "regenerate: rlspec contract --format markdown > docs/contract.md"


def test_every_operation_and_convention_is_documented():
    doc = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    for name in OPERATIONS:
        assert f"### `{name}`" in doc and f"| `{name}` |" in _readme_block()
    for key in contract.conventions():
        assert f"### `{key}`" in doc
    for answer_id in contract.known_answers():
        assert f"| `{answer_id}` |" in doc


def test_library_values_come_from_the_matrix():
    values = contract_docs.library_values()
    if not values:
        pytest.skip("no docs/conformance.json")
    assert values["backtrack_factor"]["sb3_contrib"] == 0.8
    assert re.search(r"declared by: .*sb3_contrib `0\.8`", contract_docs.markdown())


# ------------------------------------------------------------------------------------------------
# known answers


def test_known_answers_name_real_clauses_and_use_their_operation():
    ids = {c.id: c for c in catalogue.clauses()}
    assert contract.known_answers(), "the contract holds the known answers"
    for answer in contract.known_answers().values():
        for clause_id in answer.clauses:
            assert clause_id in ids and answer.operation in ids[clause_id].operations, (answer.id, clause_id)


DECIMAL = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?![\w.])")


def _numbers(value):
    """Every finite number in a known answer's data (fractions as floats), flattened."""
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, str) and "/" in value:
        return [float(Fraction(value))]
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value else []


@pytest.mark.parametrize("clause_id", sorted({c for a in contract.known_answers().values() for c in a.clauses}))
def test_the_statements_quote_their_known_answers(clause_id):
    """The catalogue's statements keep their numbers in prose (they are the normative statement); where one quotes a
    number of its clause's known answers it must agree with it. A decimal of the statement with three or more
    significant digits within 1% of a known-answer number counts as a quote (numbers the statement uses for
    other things, an epsilon, a clamp, are not that close to any); it agrees when the two are equal to half a unit
    in the statement's last decimal, or in the known answer's published last decimal."""
    answers = [a for a in contract.known_answers().values() if clause_id in a.clauses]
    pool = [(v, a.published_error(name) if name in {**a.outputs, **a.derived} else 0.0)
            for a in answers for part in ("inputs", "outputs", "derived") for name, value in getattr(a, part).items()
            for v in _numbers(value)]
    statement = catalogue.by_id(clause_id).statement
    for match in DECIMAL.finditer(statement):
        text = match.group(0)
        quoted, decimals = abs(float(text)), len(text.split(".")[1])
        if len(text.lstrip("+-").replace(".", "").lstrip("0")) < 3:
            continue
        close = [(abs(v), e) for v, e in pool if abs(abs(v) - quoted) <= 0.01 * quoted]
        if close:
            assert any(abs(v - quoted) <= max(0.5 * 10.0**-decimals, e) + 1e-15 for v, e in close), \
                f"{clause_id}'s statement quotes {text}; its known answers say {sorted({v for v, _ in close})}"


def _load_with(tmp_path, monkeypatch, old: str, new: str):
    """Load the contract with one replacement in 10_gae.toml's first known answer."""
    source = (ROOT / "spec" / "contract" / "10_gae.toml").read_text()
    assert old in source
    (tmp_path / "00_candidate.toml").write_text((ROOT / "spec" / "contract" / "00_candidate.toml").read_text())
    (tmp_path / "10_gae.toml").write_text(source.replace(old, new, 1))
    monkeypatch.setattr(contract, "CONTRACT_DIR", tmp_path)
    contract.load.cache_clear()
    try:
        return contract.load()
    finally:
        monkeypatch.undo()
        contract.load.cache_clear()


@pytest.mark.parametrize("old, new, message", [
    ("lam = 0.5 }", "lam = 0.5, lambda_ = 1 }", r"known answer gae.terminal-after-step-1: inputs/outputs must be gae's"),
    ("lam = 0.5 }", 'lam = "half" }', r"gae.terminal-after-step-1: lam = 'half' is not a value of type scalar"),
    ("lam = 0.5 }", 'lam = "1/0" }', r"lam = '1/0' is not a value of type scalar"),
    ('id = "gae.terminal-after-step-1"', 'id = "gae.Terminal+1"', r"an id is '<chapter>.<name>' in lowercase letters"),
    ("terminated = [false, true, false, false]", "terminated = [0, 1, 0, 0]", r"terminated = \[0, 1, 0, 0\] is not a value of type bool"),
    ('returns = [1.375, 1.0, 1.625, 2.0] }', 'returns = [1.375, 1.0, 1.625, 2.0] }\ndigits = { value = 3 }',
     r"digits is a number of decimals .* per output or derived name \(\['advantages', 'returns'\]\)"),
    ('returns = [1.375, 1.0, 1.625, 2.0] }', 'returns = [1.375, 1.0, 1.625, 2.0] }\ndigits = 40', r"digits is a number of decimals"),
    ('returns = [1.375, 1.0, 1.625, 2.0] }', 'returns = [1.375, 1.0, 1.625, 2.0] }\nderived = { "sum" = "ten" }',
     r"derived is a table of named numbers"),
    ('returns = [1.375, 1.0, 1.625, 2.0] }', 'returns = [1.375, 1.0, 1.625, 2.0] }\nderived = { returns = 1.0 }',
     r"\['returns'\] is both an output and derived"),
])
def test_a_malformed_known_answer_is_refused(tmp_path, monkeypatch, old, new, message):
    with pytest.raises(ContractError, match=message):
        _load_with(tmp_path, monkeypatch, old, new)


def test_published_digits_give_half_a_unit_in_the_last_place(tmp_path, monkeypatch):
    loaded = _load_with(tmp_path, monkeypatch, 'returns = [1.375, 1.0, 1.625, 2.0] }',
                        'returns = [1.375, 1.0, 1.625, 2.0] }\ndigits = { returns = 6 }\nderived = { "A_0 + A_1" = 1.375 }')
    answer = loaded.known_answers["gae.terminal-after-step-1"]
    assert answer.published_error("returns") == 5e-7 and answer.published_error("advantages") == 0.0
    assert answer.value("A_0 + A_1") == 1.375 and answer.decimals("A_0 + A_1") is None
    fractions = contract.KnownAnswer("x", "gae", (), "", {"gamma": 0.2}, {"advantages": ["1/6", 0.5]}, derived={"w": "-2/3"})
    assert fractions.value("advantages") == [1 / 6, 0.5] and fractions.value("w") == -2 / 3
    assert fractions.exact("advantages") == [Fraction(1, 6), Fraction(1, 2)] and fractions.exact("gamma") == Fraction(1, 5)
    for decimals, literal in ((3, 5e-4), (6, 5e-7), (7, 5e-8), (8, 5e-9)):
        assert contract.KnownAnswer("x", "gae", (), "", {}, {}, digits=decimals).published_error("y") == literal

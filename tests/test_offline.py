"""The offline-RL chapter: the reference and the oracles pinned to the contract's known answers, the declared
conventions judged exactly (a wrong declaration fails, the density-inside form fails CQL-SAMPLED-TEMPERATURE by
its own declaration), the tolerances, dataset actions reaching the candidate as integers, and each proof
refuting a wrong formula."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
import torch

from conftest import ROOT
from rlspec.checks import load, run_conformance
from rlspec.checks.clauses import offline as checks
from rlspec.checks.runner.protocol import Candidate
from rlspec.reference import offline as ref
from rlspec.spec import contract
from rlspec.spec.proofs import PROVED, REFUTED
from rlspec.spec.proofs import offline as proofs

CLAUSES = "CQL-*,EXPECTILE-*,IQL-*,AWR-*"
OPERATIONS = ("cql_penalty", "cql_sampled_penalty", "expectile_loss", "iql_targets", "awr_loss")


def candidate(conventions=None, **operations) -> Candidate:
    operations = operations or {name: getattr(ref, name) for name in OPERATIONS}
    return Candidate(spec="test", name="test", operations=operations, conventions=dict(conventions or {}))


def torch_inputs(answer):
    """A known answer's inputs as the suite passes them to a torch operation (integer actions as int64)."""
    out = {}
    for name, value in answer.arrays().items():
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value.astype(np.int64) if name == "actions" else value)
        out[name] = value
    return out


# ---------------------------------------------------------------------------------------------
# the reference against the contract's known answers


@pytest.mark.parametrize("answer_id", sorted(a for a in contract.known_answers() if a.startswith("offline.")))
def test_reference_meets_the_known_answer(answer_id):
    answer = contract.known_answer(answer_id)
    function = getattr(ref, answer.operation)
    if answer.operation == "iql_targets":
        got = function(**answer.arrays())
    else:
        got = function(**torch_inputs(answer))
    got = got if isinstance(got, tuple) else (got,)
    names = [o.name for o in contract.operations()[answer.operation].outputs]
    for name, value in zip(names, got):
        value = value.detach().numpy() if isinstance(value, torch.Tensor) else value
        expected = np.asarray(answer.outputs[name])
        if answer.digits is None:
            np.testing.assert_array_equal(value, expected, err_msg=f"{answer_id}: {name}")
        else:
            # published to `digits` decimals, computed in float64 from inputs as large as `scale` (Q = 1000 cancels)
            scale = max(float(np.max(np.abs(v))) for v in answer.arrays().values() if isinstance(v, np.ndarray))
            tol = 10.0 ** -answer.digits * np.maximum(1, np.abs(expected)) + 8 * 2.0**-53 * scale
            assert np.all(np.abs(value - expected) <= tol), (answer_id, name, value, expected)


def test_sampled_oracle_meets_the_published_alternatives():
    """The known answers' meanings publish the sum-normalised and density-inside values: the oracle gives them."""
    box, hot = checks.SAMPLED_KNOWN
    summed = checks.sampled_oracle(box, checks.Estimator(normalisation="sum"))
    assert summed[1] == pytest.approx(3.1069551235115144, abs=1e-14)
    inside = checks.sampled_oracle(hot, checks.Estimator(form="density-inside"))
    assert inside[0] == pytest.approx(2.2052685691697344, abs=1e-14)
    assert checks.sampled_oracle(box, checks.Estimator())[0] == pytest.approx(math.log(4), abs=1e-15)  # the log-volume


def test_expectile_of_the_known_distribution():
    x, p = [0.0, 1.0, 3.0], [0.25, 0.25, 0.5]
    assert checks.expectile_of(x, p, 0.75) == 2.375
    assert checks.expectile_of(x, p, 0.5) == 1.75  # the mean
    assert checks.expectile_of(x, p, 0.25) < 1.75 < checks.expectile_of(x, p, 0.9)


def test_cql_oracle_is_positive_and_below_the_log_action_count():
    q = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [5.0, -3.0, 1.0]])
    for a in range(3):
        out, L, _ = checks.cql_oracle(q, np.full(3, a), 1.0)
        hard = np.max(q, axis=1) - q[:, a]
        assert np.all(out > hard) and np.all(out <= hard + math.log(3) + 1e-15)


def test_tolerances_are_tight_in_float64():
    q = np.array([[1.0, 2.0, 3.0]])
    assert checks.cql_tolerance(q, np.array([0]), 0.5, 2.0**-53)[0] < 1e-13
    s = checks.SAMPLED_KNOWN[0]
    assert np.all(checks.sampled_tolerance(s, checks.Estimator(), 2.0**-53) < 1e-13)
    _, _, tol, dtol = checks.expectile_tolerances(np.array([3.0]), np.array([1.0]), 0.75, 2.0**-53)
    assert tol[0] < 1e-14 and dtol[0] < 1e-14


def test_the_clip_is_exact_where_the_weight_is_surely_clipped():
    rule = checks.WeightRule()
    bound = checks.weight_error(rule, np.array([10.0, 1e4]), 1.0, 2.0**-24)
    assert np.all(bound <= 100 * checks.ELEMENTARY * 2.0**-24 * (2 + math.log(100)))


# ---------------------------------------------------------------------------------------------
# the reference passes; the operations are called as the contract says


def test_reference_passes_the_chapter():
    run = run_conformance(candidate(), clauses=CLAUSES)
    assert run.ok and {r.status for r in run.results} == {"pass"}, [(r.id, r.message) for r in run.failures]


def test_dataset_actions_reach_the_candidate_as_integers():
    seen = []

    def cql_penalty(q_values, actions, alpha):
        seen.append(actions.dtype)
        return ref.cql_penalty(q_values, actions, alpha)

    result = run_conformance(candidate(cql_penalty=cql_penalty), clauses=["CQL-PENALTY-VALUES"])["CQL-PENALTY-VALUES"]
    assert result.status == "pass" and set(seen) == {torch.int64}


# ---------------------------------------------------------------------------------------------
# declared conventions are judged exactly


def summed_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    n = q_uniform.shape[-1] + q_policy.shape[-1]
    return ref.cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature) \
        + alpha * temperature * math.log(n)


def density_inside_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    log_uniform = -torch.log(action_high - action_low).sum()
    t = torch.cat([q_uniform - log_uniform, q_policy - log_pi.detach()], dim=-1) / temperature
    log_z = torch.logsumexp(t, dim=-1) - math.log(t.shape[-1])
    return alpha * (temperature * log_z - q_data)


SAMPLED = "CQL-SAMPLED-*"


def test_the_sum_normalisation_passes_when_declared_and_fails_when_not():
    declared = run_conformance(candidate({"cql_sampled_normalisation": "sum"}, cql_sampled_penalty=summed_penalty), clauses=SAMPLED)
    assert declared.ok, [(r.id, r.message) for r in declared.failures]
    undeclared = run_conformance(candidate(cql_sampled_penalty=summed_penalty), clauses="CQL-SAMPLED-VALUES")["CQL-SAMPLED-VALUES"]
    assert undeclared.status == "fail" and ("declare cql_sampled_normalisation = 'sum'" in undeclared.cause or
                                            "importance weights summed" in undeclared.cause)  # the matching known mistake's text
    wrong = run_conformance(candidate({"cql_sampled_normalisation": "sum"}), clauses="CQL-SAMPLED-VALUES")["CQL-SAMPLED-VALUES"]
    assert wrong.status == "fail" and "'mean'" in wrong.cause


def test_the_density_inside_form_fails_the_temperature_clause_by_declaration():
    run = run_conformance(candidate({"cql_temperature_form": "density-inside"}, cql_sampled_penalty=density_inside_penalty), clauses=SAMPLED)
    statuses = {r.id: r.status for r in run.results}
    assert statuses.pop("CQL-SAMPLED-TEMPERATURE") == "fail"
    assert set(statuses.values()) == {"pass"}, [(r.id, r.message) for r in run.failures]
    assert "by declaration" in run["CQL-SAMPLED-TEMPERATURE"].cause


def test_awr_declarations_no_clip_and_temperature():
    def no_clip(log_prob, advantages, beta):
        return -torch.exp(advantages.detach() / beta) * log_prob

    run = run_conformance(candidate({"awr_max_weight": None, "awr_beta": "temperature"}, awr_loss=no_clip), clauses="AWR-*")
    assert run.ok, [(r.id, r.message) for r in run.failures]
    clipped = run_conformance(candidate({"awr_max_weight": None}), clauses="AWR-WEIGHT-VALUES")["AWR-WEIGHT-VALUES"]
    assert clipped.status == "fail"  # the reference clips at 100: the declaration 'no clip' is judged exactly
    twenty = run_conformance(candidate({"awr_max_weight": 20.0}), clauses="AWR-WEIGHT-CLIP")["AWR-WEIGHT-CLIP"]
    assert twenty.status == "fail"


# ---------------------------------------------------------------------------------------------
# diagnoses name the library findings


def test_the_tianshou_grouping_and_the_unit_box_density_are_named():
    grouped = load(str(ROOT / "tests" / "mutants" / "offline_cql_sampled_grouped_logsumexp.py"))
    result = run_conformance(grouped, clauses=["CQL-SAMPLED-VALUES"])["CQL-SAMPLED-VALUES"]
    assert "Tianshou 2.0.1" in result.cause
    unit = load(str(ROOT / "tests" / "mutants" / "offline_cql_sampled_unit_box_density.py"))
    result = run_conformance(unit, clauses=["CQL-SAMPLED-UNIFORM-DENSITY"])["CQL-SAMPLED-UNIFORM-DENSITY"]
    assert "[-1, 1]^D" in result.cause and "TorchRL" in result.cause


# ---------------------------------------------------------------------------------------------
# the proofs refute wrong formulas


@pytest.mark.parametrize("name, run", [
    ("max in place of logsumexp", lambda: proofs._logsumexp_penalty_bounds(log_partition=lambda Q: sp.Max(*Q))),
    ("importance weights missing", lambda: proofs._importance_sampled_partition(weight=lambda q, lp, T: sp.exp(q / T))),
    ("log-density added", lambda: proofs._importance_sampled_partition(weight=lambda q, lp, T: sp.exp(q / T) * sp.exp(lp))),
    ("density inside the temperature", lambda: proofs._importance_sampled_partition(weight=proofs.density_inside_weight)),
    ("no importance weight in the log", lambda: proofs._sampled_penalty_biased_low(estimate=lambda q, lp: q)),
    ("expectile weight reversed", lambda: proofs._expectile_minimiser(weight=lambda u, tau: tau if u < 0 else 1 - tau)),
    ("the behaviour policy as the target", lambda: proofs._weighted_regression_fixed_point(target=lambda mu, w: list(mu))),
])
def test_a_wrong_formula_is_refuted(name, run):
    result = run()
    assert result.status == REFUTED, (name, result.status, result.counterexample)
    assert " = " in result.counterexample


def test_the_registered_proofs_prove():
    for proof_id in ("offline.logsumexp_penalty_bounds", "offline.importance_sampled_partition", "offline.density_inside_biased",
                     "offline.sampled_penalty_biased_low", "offline.expectile_minimiser", "offline.weighted_regression_fixed_point"):
        from rlspec.spec.proofs import run

        assert run(proof_id).status == PROVED, proof_id

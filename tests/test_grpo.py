"""The GRPO chapter: the reference and the oracle pinned to the libraries' measured numbers (verl,
OpenRLHF, TRL), the exact expected gradients, the tolerances, the declared conventions checked exactly (a wrong
declaration fails), the clamp locator, and each proof refuting a wrong formula."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from rlspec.checks import load, run_conformance
from rlspec.checks.clauses import grpo as checks
from rlspec.checks.runner.protocol import Candidate
from rlspec.reference import grpo as ref
from rlspec.spec import contract
from rlspec.spec.contract import ContractError
from rlspec.spec.proofs import PROVED, REFUTED
from rlspec.spec.proofs import grpo as proofs

CLAUSES = "GROUP-*,KL-PENALTY-*"
MUTANTS, VARIANTS = "tests/mutants", "tests/variants"
DEFAULT = checks.GroupConventions()
KL_KNOWN_P, KL_KNOWN_Q = (np.array(contract.known_answer("kl.known-k1").value(k)) for k in ("exp(logp_sampler)", "exp(logp_other)"))


def candidate(conventions=None, xfail=None, **operations) -> Candidate:
    operations = operations or {"group_advantages": ref.group_advantages, "kl_penalty": ref.kl_penalty}
    return Candidate(spec="test", name="test", operations=operations, conventions=dict(conventions or {}),
                     xfail=dict(xfail or {}))


def verl_group_advantages(scores, groups, kind):
    """verl's compute_grpo_outcome_advantage (singleton: mean 0, std 1; unbiased std + 1e-6), per id."""
    out = np.zeros_like(scores)
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        r = scores[idx]
        mean, std = (0.0, 1.0) if len(r) == 1 else (r.mean(), r.std(ddof=1))
        out[idx] = (r - mean) / (std + 1e-6) if kind == "grpo" else r - mean if kind == "mean" else (
            r if len(r) == 1 else r - (r.sum() - r) / (len(r) - 1))
    return out


# ---------------------------------------------------------------------------------------------
# group advantages: the reference and the oracle against the probes


FIELDS = {"group_std_ddof": "ddof", "group_std_eps": "eps", "group_singleton": "singleton", "group_unscorable": "unscorable"}


def close(actual, expected, published):
    np.testing.assert_allclose(actual, expected, rtol=1e-15, atol=published + 1e-15)


@pytest.mark.parametrize("answer", list(contract.known_answers("group_advantages").values()), ids=lambda a: a.id)
def test_every_group_known_answer(answer):
    """The oracle under the answer's conventions, and the reference where they are its own (the defaults)."""
    x = answer.arrays()
    conv = dataclasses.replace(DEFAULT, **{FIELDS[k]: v for k, v in answer.conventions.items()})
    expected, published = answer.value("advantages"), answer.published_error("advantages")
    close(checks.expected_advantages(x["scores"], x["groups"], x["kind"], conv), expected, published)
    if not answer.conventions:
        close(ref.group_advantages(**x), expected, published)


def test_the_singleton_declaration_is_what_verl_computes():
    # verl computes in float32: 0.49999952316329654, 1.9999980926531862
    np.testing.assert_allclose(contract.known_answer("grpo.verl-singletons-score").value("advantages")[4:],
                               [0.49999952316329654, 1.9999980926531862], rtol=1e-7)
    assert list(ref.group_advantages(np.array([0.5, 2.0]), np.array([1, 2]), "grpo")) == [0.0, 0.0]  # default: zero


def test_reference_agrees_with_the_exact_oracle_on_random_interleaved_groups():
    rng = np.random.default_rng(0)
    for _ in range(50):
        groups = rng.integers(0, 5, size=20) * 1000 + 17
        scores = rng.normal(size=20)
        scores[rng.random(20) < 0.1] = np.nan
        for kind in ("grpo", "rloo", "mean"):
            expected = checks.expected_advantages(scores, groups, kind, DEFAULT)
            tol = checks.group_tolerance(scores, groups, kind, DEFAULT, 2.0**-53)
            assert np.all(np.abs(ref.group_advantages(scores, groups, kind) - expected) <= tol)
            assert tol.max() < 1e-12


def test_identical_scores_give_exact_zeros_and_tolerance_is_rounding_sized():
    for kind in ("grpo", "rloo", "mean"):
        adv = ref.group_advantages(np.array([0.1, 0.1, 0.1]), np.array([2, 2, 2]), kind)
        assert np.all(np.isfinite(adv)) and np.max(np.abs(adv)) < 1e-9
    tol = checks.group_tolerance(np.array([0.1, 0.1, 0.1]), np.array([2, 2, 2]), "grpo", DEFAULT, 2.0**-53)
    assert tol.max() < 1e-9  # the centred residue of a float mean over eps, not an O(1) allowance


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError, match="grpo"):
        ref.group_advantages(np.zeros(2), np.zeros(2, dtype=int), "ppo")


def test_group_ids_reach_the_candidate_as_integers():
    seen = []

    def spy(scores, groups, kind):
        seen.append(np.asarray(groups).dtype.kind)
        return ref.group_advantages(scores, groups, kind)

    assert run_conformance(candidate(group_advantages=spy), clauses="GROUP-UNSORTED-IDS").ok
    assert set(seen) == {"i"}


# ---------------------------------------------------------------------------------------------
# the baseline identities through the operation


def test_leave_one_out_is_unbiased_and_the_group_mean_scaled_by_one_minus_one_over_g():
    pi, R = np.array([0.25, 0.25, 0.5]), np.array([1.0, 0.0, 0.5])
    grad_J = pi * (R - pi @ R)
    for G in (2, 3, 4):
        scores, groups, actions, weights = checks.joint_outcomes(pi, R, G, np.random.default_rng(G))
        loo = checks.expected_policy_gradient(ref.group_advantages(scores, groups, "rloo"), actions, weights, pi)
        mean = checks.expected_policy_gradient(ref.group_advantages(scores, groups, "mean"), actions, weights, pi)
        np.testing.assert_allclose(loo, G * grad_J, atol=1e-15)
        np.testing.assert_allclose(mean, (G - 1) * grad_J, atol=1e-15)


def test_std_normalisation_is_not_parallel_to_the_policy_gradient():
    pi, R = np.full(3, 1 / 3), np.array([0.0, 1.0, 3.0])
    scores, groups, actions, weights = checks.joint_outcomes(pi, R, 2)
    free = dataclasses.replace(DEFAULT, eps=1e-300)
    estimate = checks.expected_policy_gradient(checks.expected_advantages(scores, groups, "grpo", free), actions, weights, pi)
    np.testing.assert_allclose(estimate, 2 * math.sqrt(2) / 9 * np.array([-1.0, 0.0, 1.0]), atol=1e-12)  # the proof's numbers
    grad_J = pi * (R - pi @ R)
    assert abs(estimate[0] * grad_J[1] - estimate[1] * grad_J[0]) > 1e-3


# ---------------------------------------------------------------------------------------------
# the KL penalty: values, exact expected gradients


def expected_logit_gradient(kind, p, q, sampler=None):
    logp = torch.tensor(np.log(p))[None, :].requires_grad_(True)
    old = None if sampler is None else torch.tensor(np.log(sampler))[None, :]
    s = torch.tensor(p if sampler is None else sampler)[None, :]
    (ref.kl_penalty(logp, torch.tensor(np.log(q))[None, :], kind, old) * s).sum().backward()
    v = logp.grad[0].numpy()
    return v - p * v.sum()


EXPECTED_GRADIENT = "sum_y s(y) d kl(y) / d theta"


@pytest.mark.parametrize("answer", list(contract.known_answers("kl_penalty").values()), ids=lambda a: a.id)
def test_the_reference_gives_every_published_expected_gradient(answer):
    x = answer.arrays()
    p, q = np.exp(x["logp"][0]), np.exp(x["logp_ref"][0])
    old = np.exp(x["logp_old"][0]) if "logp_old" in x else None
    np.testing.assert_allclose(expected_logit_gradient(x["kind"], p, q, old), answer.value(EXPECTED_GRADIENT), rtol=0,
                               atol=answer.published_error(EXPECTED_GRADIENT) + 1e-15)


@pytest.mark.parametrize("kind", ["k1", "k2", "k3", "k1+", "k2+", "k3+"])
def test_per_token_values_are_the_kl_chapters_known_answer(kind):
    known = contract.known_answer(f"kl.known-{kind.rstrip('+')}")
    x = known.arrays()
    values = ref.kl_penalty(torch.tensor(x["logp_sampler"])[None], torch.tensor(x["logp_other"])[None], kind)[0].numpy()
    np.testing.assert_allclose(values, known.value("estimates"), rtol=0, atol=known.published_error("estimates"))


def test_closed_forms_match_the_published_gradients():
    a, b = np.log(KL_KNOWN_P), np.log(KL_KNOWN_Q)
    reverse, forward = (contract.known_answer(f"grpo.kl-penalty-{k}") for k in ("k2", "k3"))
    np.testing.assert_allclose(checks.reverse_gradient(a, b), reverse.value(EXPECTED_GRADIENT), atol=reverse.published_error(EXPECTED_GRADIENT))
    np.testing.assert_allclose(checks.forward_gradient(a, b), forward.value(EXPECTED_GRADIENT), atol=1e-15)


def test_straight_through_values_are_the_named_estimator_exactly():
    logp = torch.tensor([[-0.25, -1000.0, -3.0]], dtype=torch.float64, requires_grad=True)
    logp_ref = torch.tensor([[29.75, -1030.0, -1.0]], dtype=torch.float64)
    for kind in ("k1", "k2", "k3"):
        plain = ref.kl_penalty(logp, logp_ref, kind)
        assert torch.equal(ref.kl_penalty(logp, logp_ref, kind + "+"), plain)
        assert torch.equal(ref.kl_penalty(logp, logp_ref, kind + "+", logp_old=logp.detach() - 5), plain)
    (grad,) = torch.autograd.grad(ref.kl_penalty(logp, logp_ref, "k3+").sum(), logp)
    assert torch.equal(grad, (logp - logp_ref).detach())  # -x exactly: no cancellation at x = 30


def test_tolerances_scale_with_the_inputs():
    a, b = np.array([-0.25, -1000.0]), np.array([29.75, -970.0])
    assert checks.derivative_tolerance("k3", a, b, None, 2.0**-53)[0] > 2.0**-53 * np.exp(30)  # 1 - e^x carries e^x u
    assert checks.derivative_tolerance("k2+", a[:1], b[:1], None, 2.0**-53)[0] < 1e-13
    assert checks.value_tolerance("k1+", a, b, None, 2.0**-53)[0] > checks.value_tolerance("k1", a, b, None, 2.0**-53)[0]


def test_clamp_locator_reports_the_ratio_where_verl_and_openrlhf_start_to_bias():
    verl = run_conformance(f"{MUTANTS}/kl_penalty_verl_clamps.py", clauses="KL-PENALTY-EXTREME-LOG-RATIO")["KL-PENALTY-EXTREME-LOG-RATIO"]
    assert verl.status == "fail" and "2.6109" in verl.cause and "13.61" in verl.cause and "< -11" in verl.cause
    openrlhf = run_conformance(f"{MUTANTS}/kl_penalty_openrlhf_clamps.py", clauses="KL-PENALTY-EXTREME-LOG-RATIO")["KL-PENALTY-EXTREME-LOG-RATIO"]
    assert openrlhf.status == "fail" and "kind 'k1'" in openrlhf.cause and "> 10" in openrlhf.cause and "< -10" in openrlhf.cause


# ---------------------------------------------------------------------------------------------
# conformance: the reference passes, conventions are checked exactly


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("seed", [0, 7])
def test_reference_passes_the_chapter(dtype, seed):
    run = run_conformance(candidate(), clauses=CLAUSES, dtype=dtype, seed=seed)
    assert run.ok and {r.status for r in run.results} == {"pass"}, [(r.id, r.message) for r in run.failures]
    assert len(run.results) == 13


def test_reference_passes_the_chapter_at_ci_profile():
    run = run_conformance(candidate(), clauses=CLAUSES, profile="ci", seed=5)
    assert run.ok, [(r.id, r.message) for r in run.failures]


def test_verl_singleton_passes_when_declared_and_fails_when_not():
    declared = candidate({"group_singleton": "score"}, group_advantages=verl_group_advantages)
    assert run_conformance(declared, clauses="GROUP-SINGLETON,GROUP-GRPO-VALUES,GROUP-RLOO-LEAVE-ONE-OUT").ok
    undeclared = candidate(group_advantages=verl_group_advantages)
    result = run_conformance(undeclared, clauses="GROUP-SINGLETON")["GROUP-SINGLETON"]
    # the likely cause: the check's (declare group_singleton = 'score') or the known mistake it matches (verl's singleton)
    assert result.status == "fail" and "group_singleton" in result.cause
    wrong = candidate({"group_singleton": "score"})  # the reference gives 0, declaring 'score'
    assert run_conformance(wrong, clauses="GROUP-SINGLETON")["GROUP-SINGLETON"].status == "fail"


def test_singleton_declared_by_kind():
    def mixed(scores, groups, kind):  # verl's vectorised pair: GRPO keeps a singleton's score, RLOO gives it 0
        return verl_group_advantages(scores, groups, kind) if kind != "rloo" else ref.group_advantages(scores, groups, kind)

    by_kind = candidate({"group_singleton": {"grpo": "score", "mean": "score"}}, group_advantages=mixed)
    assert run_conformance(by_kind, clauses="GROUP-SINGLETON")["GROUP-SINGLETON"].status == "pass"
    one_value = candidate({"group_singleton": "score"}, group_advantages=mixed)
    result = run_conformance(one_value, clauses="GROUP-SINGLETON")["GROUP-SINGLETON"]
    assert result.status == "fail" and "kind 'rloo'" in result.cause
    with pytest.raises(ContractError, match="group_singleton takes 'zero' or 'score', or a table from kinds grpo, rloo, mean"):
        candidate({"group_singleton": {"ppo": "score"}})


def test_declared_ddof_and_eps_are_checked_exactly():
    variant = load(f"{VARIANTS}/grpo_numpy_verl_style.py")  # ddof 0, eps 1e-9, singleton score, unscorable nan
    assert run_conformance(variant, clauses="GROUP-*").ok
    for change, phrase in (({"group_std_ddof": 1}, "ddof 0"), ({"group_std_eps": 1e-6}, "epsilon is 1e-09")):
        variant = load(f"{VARIANTS}/grpo_numpy_verl_style.py")
        variant.conventions = {**variant.conventions, **change}
        result = run_conformance(variant, clauses="GROUP-GRPO-VALUES")["GROUP-GRPO-VALUES"]
        assert result.status == "fail" and phrase in result.cause, result.cause


def test_trl_epsilon_undeclared_is_named():
    trl = load(f"{VARIANTS}/grpo_torch_scatter.py")
    trl.conventions = {}
    result = run_conformance(trl, clauses="GROUP-GRPO-VALUES")["GROUP-GRPO-VALUES"]
    assert result.status == "fail" and "epsilon is 0.0001" in result.cause


def test_bad_declarations_are_refused():
    for conventions in ({"group_std_ddof": 2}, {"group_std_eps": 0.0}, {"group_singleton": "nan"}, {"group_unscorable": 0},
                        {"kl_penalty_off_policy": "ignored"}):
        with pytest.raises(ContractError, match=f"{next(iter(conventions))} takes "):
            candidate(conventions)


def test_on_policy_only_declaration_fails_the_off_policy_clause_by_declaration():
    uncorrected = load(f"{MUTANTS}/kl_penalty_off_policy_uncorrected.py")
    uncorrected.conventions = {"kl_penalty_off_policy": "on-policy-only"}
    run = run_conformance(uncorrected, clauses="KL-PENALTY-*")
    off = run["KL-PENALTY-OFF-POLICY"]
    assert off.status == "fail" and "declared kl_penalty_off_policy = 'on-policy-only'" in off.message and "-0.222398" in off.message
    assert all(run[c].status == "pass" for c in ("KL-PENALTY-VALUES", "KL-PENALTY-EXPECTED-GRADIENT", "KL-PENALTY-EXTREME-LOG-RATIO"))
    uncorrected.xfail = {"KL-PENALTY-OFF-POLICY": "verl applies no importance weight to the KL loss"}
    assert run_conformance(uncorrected, clauses="KL-PENALTY-OFF-POLICY")["KL-PENALTY-OFF-POLICY"].status == "xfail"


def test_a_detached_penalty_is_diagnosed():
    detached = candidate(kl_penalty=lambda logp, logp_ref, kind, logp_old=None: ref.kl_penalty(logp.detach(), logp_ref, kind))
    result = run_conformance(detached, clauses="KL-PENALTY-EXPECTED-GRADIENT")["KL-PENALTY-EXPECTED-GRADIENT"]
    assert result.status == "fail" and "detached" in result.cause


# ---------------------------------------------------------------------------------------------
# proofs: each refutes a wrong formula


def test_proofs_refute_wrong_formulas():
    assert proofs._leave_one_out_unbiased().status == PROVED
    assert proofs._leave_one_out_unbiased(advantage=proofs.group_mean).status == REFUTED  # the sample included
    assert proofs._group_mean_scales(advantage=proofs.leave_one_out).status == REFUTED
    assert proofs._std_normalisation_biased(advantage=proofs.group_mean).status == REFUTED  # mean-centring is parallel
    wrong = {k: proofs.plain_derivative(k.rstrip("+")) for k in ("k1", "k2", "k3", "k1+", "k2+", "k3+")}  # no straight-through
    result = proofs._kl_penalty_gradients(derivatives=wrong)
    assert result.status == REFUTED and "k1+" in result.steps[-1]


# ---------------------------------------------------------------------------------------------
# kl_penalty_kinds: a candidate that has some kinds only (TRL: k3 and k3+)


def _k3_only(logp, logp_ref, kind, logp_old=None):
    if kind not in ("k3", "k3+"):
        raise ValueError(f"only k3 here, not {kind}")
    return ref.kl_penalty(logp, logp_ref, kind, logp_old)


def test_declared_penalty_kinds_judge_what_the_candidate_has():
    run = run_conformance(candidate({"kl_penalty_kinds": ["k3+", "k3"]}, kl_penalty=_k3_only), clauses="KL-PENALTY-*")
    assert [r.status for r in run.results] == ["pass"] * 4
    assert all("judged on the declared kinds k3, k3+ only (kl_penalty_kinds)" in r.notes for r in run.results)
    undeclared = run_conformance(candidate(kl_penalty=_k3_only), clauses="KL-PENALTY-VALUES")
    assert undeclared["KL-PENALTY-VALUES"].status == "error" and "only k3 here" in undeclared["KL-PENALTY-VALUES"].message


@pytest.mark.parametrize("declared", ["k3", [], ["k3", "k4"]])
def test_malformed_penalty_kinds_are_refused(declared):
    with pytest.raises(ContractError, match="kl_penalty_kinds takes a non-empty list of 'k1', 'k2', 'k3', 'k1\\+'"):
        candidate({"kl_penalty_kinds": declared})

"""The policy-gradient chapter: the reference pinned to exact values, the numeric checks run
directly on it, the checks' closed forms against autograd, the derived tolerances against the
1e-6 target, and the declared conventions checked exactly (a wrong declaration fails)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from conftest import REPEAT
from rlspec.checks import load, run_conformance
from rlspec.checks.clauses import pg as checks
from rlspec.checks.runner.protocol import Candidate
from rlspec.reference import pg as ref
from rlspec.spec import contract
from rlspec.spec.contract import ContractError

CLAUSES = "pg"  # the chapter name selects its seven clauses
VARIANTS = "tests/variants"


def t(values, grad=False, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype, requires_grad=grad)


def candidate(conventions=None, **operations) -> Candidate:
    """A candidate from functions (default: this chapter's reference, independent of other chapters)."""
    operations = operations or {"reinforce_loss": ref.reinforce_loss, "actor_critic_losses": ref.actor_critic_losses}
    return Candidate(spec="test", name="test", operations=operations, conventions=dict(conventions or {}))


# ---------------------------------------------------------------------------------------------
# the reference, pinned


LEAVES = {"reinforce_loss": ("logp", "returns", "baseline"), "actor_critic_losses": ("logp", "values", "next_values")}


@pytest.mark.parametrize("answer", [a for a in contract.known_answers().values() if a.id.startswith("pg.")], ids=lambda a: a.id)
def test_the_reference_gives_every_known_answer(answer):
    """Values, and every derived gradient; a gradient of 0 is also no gradient at all (the weights detached)."""
    x = {k: (torch.tensor(v, requires_grad=k in LEAVES[answer.operation]) if isinstance(v, np.ndarray) and v.dtype != bool
             else torch.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in answer.arrays().items()}
    out = getattr(ref, answer.operation)(**x)
    out = dict(zip(answer.outputs, out if isinstance(out, tuple) else (out,)))
    for name, expected in answer.outputs.items():
        assert out[name].item() == pytest.approx(expected, abs=1e-15)
    for name, expected in answer.derived.items():
        of, leaf = name.removeprefix("d ").split(" / d ")
        (grad,) = torch.autograd.grad(out[of], [x[leaf]], allow_unused=True, retain_graph=True)
        assert (np.zeros(len(expected)) if grad is None else grad.numpy()).tolist() == expected, name


def test_the_reference_detaches_the_returns_and_the_baseline():
    logp, returns, baseline = t([-0.75, -0.25], True), t([3.0, 1.0], True), t([1.0, 2.0], True)
    loss = ref.reinforce_loss(logp, returns, baseline)
    assert loss.item() == -((-0.75) * 2.0 + (-0.25) * (-1.0)) / 2  # = 0.625
    loss.backward()
    assert logp.grad.tolist() == [-1.0, 0.5] and baseline.grad is None and returns.grad is None


def test_actor_critic_terminal_step_does_not_bootstrap_with_float_flags():
    x = contract.known_answer("pg.actor-critic-terminal").inputs
    flags = torch.tensor([float(f) for f in x["terminated"]])
    cut = torch.tensor([float(f) for f in x["truncated"]])
    critic = ref.actor_critic_losses(t(x["logp"]), t(x["values"]), t(x["next_values"]), t(x["rewards"]), flags, cut, x["gamma"])[1]
    assert critic.item() == contract.known_answer("pg.actor-critic-terminal").outputs["critic_loss"]


def test_actor_critic_truncated_step_bootstraps():
    answer = contract.known_answer("pg.actor-critic-truncated")
    x = answer.inputs
    actor, critic = ref.actor_critic_losses(t(x["logp"]), t(x["values"]), t(x["next_values"]), t(x["rewards"]),
                                            torch.tensor(x["terminated"]), torch.tensor(x["truncated"]), x["gamma"])
    assert (actor.item(), critic.item()) == (answer.outputs["actor_loss"], answer.outputs["critic_loss"])


def test_critic_bias_gradient_is_minus_two_mean_delta():
    """The bias-gradient check, on the reference with a real critic network (nn.Linear) for s and s'."""
    torch.manual_seed(0)
    critic = torch.nn.Linear(3, 1).double()
    obs, next_obs = torch.randn(8, 3, dtype=torch.float64), torch.randn(8, 3, dtype=torch.float64)
    rewards, terminated = torch.randn(8, dtype=torch.float64), torch.rand(8) < 0.3
    values, next_values = critic(obs).squeeze(-1), critic(next_obs).squeeze(-1)
    truncated = torch.rand(8) < 0.3  # a time limit bootstraps: it changes nothing
    _, loss = ref.actor_critic_losses(torch.zeros(8, dtype=torch.float64), values, next_values, rewards, terminated, truncated, 0.9)
    loss.backward()
    delta = rewards + 0.9 * torch.where(terminated, 0.0, next_values) - values
    assert critic.bias.grad.item() == pytest.approx(-2 * delta.mean().item(), abs=1e-14)


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-14), (torch.float32, 1e-6)])
def test_baseline_identity_through_a_network_over_four_actions(dtype, tol):
    """The score identity: sum_a pi(a|s) grad log pi(a|s) = 0 over all four actions of a small network, to 1e-6."""
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4)).to(dtype)
    log_pi = torch.log_softmax(net(torch.randn(5, 3, dtype=dtype)), dim=-1)  # (5 states, 4 actions)
    weights = log_pi.exp().detach() * torch.randn(5, 1, dtype=dtype)  # pi(a|s) b(s)
    ref.reinforce_loss(log_pi.reshape(-1), weights.reshape(-1)).backward()
    assert max(p.grad.abs().max().item() for p in net.parameters()) < tol


def test_policy_helpers_match_torch_distributions():
    weight, bias, log_std = t([[0.5, -1.0], [0.25, 0.75]]), t([0.1, -0.2]), t([-0.5, 0.3])
    obs, actions = t([[1.0, 2.0], [-0.5, 0.25]]), t([[0.3, -0.7], [1.1, 0.0]])
    normal = torch.distributions.Normal(obs @ weight + bias, log_std.exp())
    assert torch.allclose(ref.gaussian_policy_log_prob(weight, bias, log_std, obs, actions),
                          normal.log_prob(actions).sum(-1), rtol=0, atol=1e-15)
    logits = obs @ weight + bias
    assert torch.equal(ref.softmax_policy_log_probs(weight, bias, obs), torch.log_softmax(logits, -1))


# ---------------------------------------------------------------------------------------------
# the checks' machinery


@pytest.mark.parametrize("make, case", [(checks.softmax_batch, checks.SOFTMAX_SEED_CASE), (checks.gaussian_batch, checks.GAUSSIAN_SEED_CASE)])
def test_closed_form_jacobians_match_autograd(make, case):
    batch = make(case)
    rows = [torch.cat([g.reshape(-1) for g in torch.autograd.grad(batch.logp[i], batch.params, retain_graph=True)]).numpy()
            for i in range(len(batch.logp))]
    np.testing.assert_allclose(batch.jacobian, np.array(rows), rtol=0, atol=1e-14)


@pytest.mark.parametrize("make, case", [(checks.softmax_batch, checks.SOFTMAX_SEED_CASE), (checks.gaussian_batch, checks.GAUSSIAN_SEED_CASE)])
def test_the_two_routes_to_the_policy_gradient_agree(make, case):
    """Score form (sum omega Q d log pi) and pathwise form (d E[Q]): exact expectations, so equal."""
    batch = make(case)
    np.testing.assert_allclose(checks.policy_gradient(batch), (batch.omega * batch.q) @ batch.jacobian, rtol=0, atol=1e-14)
    np.testing.assert_allclose((batch.omega * batch.b) @ batch.jacobian, 0.0, atol=1e-14)  # the score has zero mean


def test_gauss_hermite_rule_is_exact_to_degree_five():
    moments = [1, 0, 1, 0, 3, 0]  # E[xi^k], xi ~ N(0, 1)
    for k, m in enumerate(moments):
        assert float(np.sum(checks.GH_WEIGHTS * checks.GH_NODES**k)) == pytest.approx(m, abs=1e-14)


def test_the_derived_bound_meets_the_seeds_one_in_a_million_in_float32():
    batch = checks.softmax_batch(checks.SOFTMAX_SEED_CASE)
    weights = np.abs(batch.omega * batch.b)
    s = 1.0 / len(weights)
    float32 = checks.expectation_tolerance(weights, batch.jacobian, s, 2.0**-24)
    float64 = checks.expectation_tolerance(weights, batch.jacobian, s, 2.0**-53)
    assert float32.max() < 1e-6  # the seed asserts 1e-6; the bound is below it
    assert float64.max() < 1e-13


# ---------------------------------------------------------------------------------------------
# conformance: the reference passes, conventions are checked exactly


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("seed", [0, 7])
def test_reference_passes_the_chapter(dtype, seed):
    run = run_conformance(candidate(), clauses=CLAUSES, dtype=dtype, seed=seed)
    assert run.ok and {r.status for r in run.results} == {"pass"}, [(r.id, r.message) for r in run.failures]


@REPEAT  # tests/test_reference.py's ci-profile run of the chapter at another seed: its lines are counted there
def test_reference_passes_the_chapter_at_ci_profile():
    run = run_conformance(candidate(), clauses=CLAUSES, profile="ci", seed=3)
    assert run.ok, [(r.id, r.message) for r in run.failures]


def test_declared_sum_and_half_are_checked_exactly():
    declared = load(f"{VARIANTS}/pg_sum_half_float32.py")
    assert run_conformance(declared, clauses=CLAUSES).ok
    declared.conventions = {}  # the same code without its declaration: sum != mean, 0.5 delta^2 != delta^2
    run = run_conformance(declared, clauses=CLAUSES)
    assert {r.id for r in run.failures} == {"PG-REINFORCE-SURROGATE-GRADIENT", "PG-BASELINE-NO-BIAS", "AC-TD-ERROR",
                                             "AC-TRUNCATION-BOOTSTRAP", "AC-CRITIC-SEMI-GRADIENT", "AC-ACTOR-WEIGHT-DETACHED"}
    assert all(r.status == "fail" for r in run.failures)
    wrong = candidate({"pg_reduction": "sum"})  # a mean implementation declaring a sum
    assert run_conformance(wrong, clauses="PG-REINFORCE-SURROGATE-GRADIENT")["PG-REINFORCE-SURROGATE-GRADIENT"].status == "fail"


@pytest.mark.parametrize("declared, allowed", [({"pg_reduction": "median"}, "'mean' or 'sum'"),
                                                ({"critic_loss_factor": 2}, "1.0 or 0.5")])
def test_a_convention_value_the_contract_does_not_allow_is_refused_at_load(declared, allowed):
    with pytest.raises(ContractError, match=f"{next(iter(declared))} takes {re.escape(allowed)}"):
        candidate(declared)


def test_a_loss_without_graph_fails_instead_of_crashing():
    def reinforce_loss(logp, returns, baseline=None):
        return -(logp.detach() * returns).mean()

    result = run_conformance(candidate(reinforce_loss=reinforce_loss), clauses="PG-REINFORCE-SURROGATE-GRADIENT")["PG-REINFORCE-SURROGATE-GRADIENT"]
    assert result.status == "fail" and "d loss / d logp" in result.message


def test_tolerances_are_absolute_below_the_smallest_normal():
    tol = checks.reinforce_gradient_tolerance(np.array([1e-45]), np.array([0.0]), 1.0, 2.0**-24)
    assert tol[0] >= 8 * np.finfo(np.float32).smallest_normal
    assert math.isclose(checks.reinforce_gradient_tolerance(np.array([2.0]), np.array([1.0]), 0.5, 2.0**-53)[0],
                        8 * 2.0**-53 * 1.5 + 8 * np.finfo(np.float64).smallest_normal, rel_tol=1e-12)

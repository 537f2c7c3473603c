"""The PPO chapter: the reference is pinned to exact numbers (the clip gradient table and the known answers), the suite's
own machinery for ppo_update (policy, recording optimizer, closed-form oracle) is right, and
unusable candidates are reported as errors, not failures."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import sympy
import torch

from rlspec.checks import run_conformance
from rlspec.checks.kit import clipping
from rlspec.checks.clauses import ppo as checks
from rlspec.checks.runner.loader import LoadError
from rlspec.reference import ppo as ref
from rlspec.spec import contract
from rlspec.spec.proofs import ppo as ppo_proofs

# ---------------------------------------------------------------------------------------------
# the reference against exact numbers


LOSSES = {"ppo_clip_loss": ("logp_new", ref.ppo_clip_loss), "ppo_value_loss": ("values", ref.ppo_value_loss),
          "ppo_entropy_loss": ("entropy", ref.ppo_entropy_loss)}
KNOWN_LOSSES = [a for a in contract.known_answers().values() if a.operation in LOSSES]


def reference_loss(answer, rows=slice(None)):
    """The reference's loss and its gradient with respect to the operation's differentiated input, on the
    known answer's inputs (``rows``: a selection of the samples)."""
    leaf, loss_fn = LOSSES[answer.operation]
    args = {k: torch.tensor(v, dtype=torch.float64)[rows] if isinstance(v, list) else v for k, v in answer.inputs.items()}
    args[leaf].requires_grad_(True)
    loss = loss_fn(**args)
    (grad,) = torch.autograd.grad(loss, args[leaf])
    return float(loss.detach()), grad.tolist()


@pytest.mark.parametrize("answer", KNOWN_LOSSES, ids=lambda a: a.id)
def test_the_reference_gives_every_loss_known_answer(answer):
    loss, grad = reference_loss(answer)
    assert loss == pytest.approx(answer.outputs["loss"], abs=answer.published_error("loss") + 1e-13)
    for name, expected in answer.derived.items():
        if name.startswith("d loss / d") and not name.endswith("each row alone"):
            np.testing.assert_allclose(grad, expected, rtol=0, atol=answer.published_error(name) + 1e-13)


@pytest.mark.parametrize("row", range(6))
def test_clip_gradient_table_p5_row_by_row(row):
    answer = contract.known_answer("ppo.clip-gradient-table")
    _, grad = reference_loss(answer, slice(row, row + 1))
    assert math.exp(answer.inputs["logp_new"][row]) == pytest.approx(answer.derived["ratio"][row], rel=1e-15)
    assert grad[0] == pytest.approx(answer.derived["d loss / d logp_new, each row alone"][row], abs=1e-12)


def test_the_check_and_the_proof_read_the_same_table():
    eps, rows = ppo_proofs.table_values()
    assert eps == sympy.Rational(1, 5) and [tuple(map(float, row)) for row in rows] == checks.GRADIENT_TABLE


def test_value_loss_without_clipping_is_the_squared_error():
    t = lambda x: torch.tensor(x, dtype=torch.float64)
    assert float(ref.ppo_value_loss(t([1.0]), t([2.0]))) == 1.0


@pytest.mark.parametrize("answer", list(contract.known_answers("normalize_advantages").values()), ids=lambda a: a.id)
def test_normalisation_p8(answer):
    ddof = answer.conventions.get("advantage_std_ddof", contract.convention("advantage_std_ddof").default)
    out = ref.normalize_advantages(np.array(answer.inputs["advantages"]), ddof=ddof)
    np.testing.assert_allclose(out, answer.outputs["advantages"], rtol=0, atol=answer.published_error("advantages"))


def test_normalisation_degenerate_and_torch():
    assert ref.normalize_advantages(np.array([3.0])).tolist() == [0.0]  # C1: finite, not 0/0
    assert ref.normalize_advantages(np.array([5.0, 5.0, 5.0])).tolist() == [0.0, 0.0, 0.0]
    answer = contract.known_answer("ppo.normalisation")
    tensor = ref.normalize_advantages(torch.tensor(answer.inputs["advantages"], dtype=torch.float64))
    np.testing.assert_allclose(tensor.tolist(), answer.outputs["advantages"], rtol=0, atol=answer.published_error("advantages"))


def test_approx_kl_is_k3_and_nonnegative():
    x = torch.tensor([0.3, -0.3], dtype=torch.float64)  # bug C12: k1 = 0 here
    assert float(ref.approx_kl(x)) == pytest.approx(0.0453, abs=1e-4)
    assert float((-x).mean()) == 0.0


# ---------------------------------------------------------------------------------------------
# the suite's policy and optimizer


@pytest.mark.parametrize("kind", ["categorical", "gaussian"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_log_probs_are_bitwise_independent_of_the_minibatch(kind, dtype):
    policy, _, batch = checks.UpdateCase(kind, n=12, seed=3).build(dtype)
    _, full, _ = policy.evaluate_actions(batch["obs"], batch["actions"])
    g = torch.Generator().manual_seed(0)
    for size in (1, 3, 7, 12):
        idx = torch.randperm(12, generator=g)[:size]
        _, part, _ = policy.evaluate_actions(batch["obs"][idx], batch["actions"][idx])
        assert torch.equal(part, full[idx])
    assert torch.equal(full, batch["logp_old"])  # the stored log pi_old is the policy's own


@pytest.mark.parametrize("kind", ["categorical", "gaussian"])
def test_closed_form_oracle_matches_the_module(kind):
    case = checks.UpdateCase(kind, n=9, seed=4)
    policy, optimizer, batch = case.build(np.float64)
    params = optimizer.snapshots[0]
    logp, magnitude = checks.module_terms(kind, params, batch["actions"].numpy(), np.arange(9))
    assert logp == pytest.approx(batch["logp_old"].numpy(), abs=1e-12)
    assert np.all(magnitude >= np.abs(logp))


def test_offset_logp_old():
    case = checks.UpdateCase("categorical", n=8, seed=3, offset=checks.OFFSETS)
    policy, _, batch = case.build(np.float64)
    own = policy.evaluate_actions(batch["obs"], batch["actions"])[1]
    assert (own - batch["logp_old"]).tolist() == pytest.approx(list(checks.OFFSETS), abs=1e-12)


def test_recording_sgd_is_plain_sgd_and_records():
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
    opt = checks.RecordingSGD([("w", p)], lr=0.5)
    (p**2).sum().backward()
    opt.step()
    assert p.tolist() == [0.0, 0.0] and opt.steps == 1
    assert opt.grads[0]["w"].tolist() == [2.0, -4.0] and opt.snapshots[1]["w"].tolist() == [0.0, 0.0]
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None
    assert repr(opt) == "RecordingSGD(lr=0.5, groups=1)"  # what a failure's call line shows of it
    assert opt.step(closure=lambda: torch.tensor(3.0)) == 3.0  # a closure's loss comes back


def test_reference_update_first_ratios_are_exactly_one():
    case = checks.UpdateCase("gaussian", n=8, seed=2)
    args = case.arguments("float64", {**checks.BASE_CONFIG, "minibatch_size": 3, "epochs": 2})
    out = ref.ppo_update(**args)
    assert torch.equal(out["ratios"], torch.ones(3, dtype=torch.float64))
    assert len(out["indices"]) == 3 and out["epochs"] == 2 and len(out["approx_kl"]) == 2
    assert args["optimizer"].steps == 6  # ceil(8 / 3) minibatches in each of 2 epochs


def test_reference_update_stops_on_kl():
    case = checks.UpdateCase("categorical", n=6, seed=5, lr=checks.KL_LR["categorical"], positive=True)
    config = {**checks.BASE_CONFIG, "epochs": 8, "minibatch_size": 6, "clip_eps": 10.0, "normalize_advantages": False}
    free = ref.ppo_update(**case.arguments("float64", config))
    assert free["epochs"] == 8 and np.all(np.diff(free["approx_kl"]) > 0)
    target = math.sqrt(free["approx_kl"][2] * free["approx_kl"][3])
    stopped = ref.ppo_update(**case.arguments("float64", {**config, "target_kl": target}))
    assert stopped["epochs"] == 4 and stopped["approx_kl"] == pytest.approx(free["approx_kl"][:4])


# ---------------------------------------------------------------------------------------------
# kinks, conventions and unusable candidates


def test_derivative_bounds_widen_only_at_kinks():
    conv = clipping.ClipRange()
    r, A = np.array([0.5, 0.8, 1.0, 1.2, 1.5]), np.array([2.0] * 5)
    lo, hi = clipping.log_derivative_bounds(r, A, 0.2, conv, 1e-12)
    assert lo.tolist() == [1.0, 0.0, 2.0, 0.0, 0.0]
    assert hi.tolist() == [1.0, 1.6, 2.0, 2.4, 0.0]


def test_dual_clip_objective():
    conv = clipping.ClipRange(dual_clip=3.0)
    r, A = np.array([10.0, 2.0, 10.0]), np.array([-2.0, -2.0, 2.0])
    assert clipping.clip_objective(r, A, 0.2, conv).tolist() == [-6.0, -4.0, 2.4]


class Module:
    """A candidate object with a few operations and declarations. (It names a ``__file__``: the
    loader looks for a built-in adapter's ``.xfail`` beside it and fails on objects without one.)"""

    __file__ = __file__

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def test_a_convention_value_outside_the_contract_is_a_load_error_not_a_failure():
    candidate = Module(RLSPEC_ARRAY="torch", RLSPEC_CONVENTIONS={"advantage_std_ddof": 2},
                       normalize_advantages=lambda advantages: advantages)
    with pytest.raises(LoadError, match=r"advantage_std_ddof'\] = 2 is not allowed; advantage_std_ddof takes 1 or 0"):
        run_conformance(candidate, clauses="PPO-ADVANTAGE-NORMALISATION")


def good_update(**kwargs):
    return ref.ppo_update(**kwargs)


@pytest.mark.parametrize(
    "update, message",
    [
        (lambda **k: [1, 2], "took no step"),  # real loops return anything: only a dict's protocol keys are read
        (lambda **k: {"ratios": [1.0]}, "lack"),
        (lambda **k: {"ratios": [1.0, 1.0], "indices": [0, 0], "approx_kl": [], "epochs": 1}, "not distinct"),
        (lambda **k: {"ratios": [1.0, 1.0], "indices": [0], "approx_kl": [], "epochs": 1}, "same number"),
        (lambda **k: {"ratios": [[1.0]], "indices": [0], "approx_kl": [], "epochs": 1}, "1-D"),
        (lambda **k: {"ratios": [1.0], "indices": [0.5], "approx_kl": [], "epochs": 1}, "non-integers"),
        (lambda **k: {"ratios": [1.0], "indices": [0], "approx_kl": [], "epochs": 1}, "took no step"),
        (lambda **k: {**good_update(**k), "epochs": "many"}, "expected an int"),
        (lambda **k: (k["advantages"].mul_(2), good_update(**k))[1], "mutated its input `advantages`"),
        (lambda **k: (good_update(**k), torch.set_grad_enabled(False))[0], "grad mode"),
        (lambda **k: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_unusable_update_is_an_error(update, message):
    result = run_conformance(Module(ppo_update=update), clauses="PPO-UPDATE-FIRST-RATIOS-ONE")["PPO-UPDATE-FIRST-RATIOS-ONE"]
    assert result.status == "error" and message in result.message, result.message


def test_update_that_does_not_move_the_policy_fails_the_kl_clause():
    def frozen(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
        for _ in range(config["epochs"]):
            optimizer.zero_grad()
            optimizer.step()  # no gradients: nothing moves
        return {"ratios": torch.ones(1), "indices": torch.zeros(1, dtype=torch.long), "approx_kl": [0.0] * config["epochs"],
                "epochs": config["epochs"]}

    result = run_conformance(Module(ppo_update=frozen), clauses="PPO-UPDATE-KL-EARLY-STOP")["PPO-UPDATE-KL-EARLY-STOP"]
    assert result.status == "fail" and "did not move the policy" in result.message


def test_failure_names_the_reproducible_case():
    from pathlib import Path

    mutant = Path(__file__).parent / "mutants" / "ppo_update_old_logp_unshuffled.py"
    result = run_conformance(str(mutant), clauses="PPO-UPDATE-FIRST-RATIOS-ONE")["PPO-UPDATE-FIRST-RATIOS-ONE"]
    assert result.status == "fail" and "UpdateCase(" in result.call and ".arguments('float64'" in result.call


def test_conventions_change_the_expected_numbers():
    """A candidate computing 0.5 (V - R)^2 passes when it declares value_loss_factor 0.5 and fails when it does not."""
    half = lambda values, returns, old_values=None, clip_eps=None: 0.5 * ((values - returns) ** 2).mean()
    declared = Module(ppo_value_loss=half, RLSPEC_CONVENTIONS={"value_loss_factor": 0.5})
    assert run_conformance(declared, clauses="PPO-VALUE-LOSS")["PPO-VALUE-LOSS"].status == "pass"
    assert run_conformance(Module(ppo_value_loss=half), clauses="PPO-VALUE-LOSS")["PPO-VALUE-LOSS"].status == "fail"


# ---------------------------------------------------------------------------------------------
# the proofs' region machinery fails closed


def test_sign_by_positive_coefficients():
    import sympy as sp

    from rlspec.spec.proofs import ppo as proofs

    a, s = proofs.a, proofs.s
    assert proofs.sign(a * s + 1) == 1 and proofs.sign(-(a + s) / (1 + s)) == -1 and proofs.sign(a - a) == 0
    assert proofs.sign(sp.Integer(-3)) == -1 and proofs.sign(a - s) is None
    assert proofs.nonnegative(a - s, "a >= s").status == "inconclusive"
    refuted = proofs.nonnegative(-a, "-a >= 0")
    assert refuted.status == "refuted" and "the gap = -" in refuted.counterexample


def test_an_undecidable_region_is_inconclusive():
    import sympy as sp

    from rlspec.spec.proofs import PROOFS

    # min(r A, A / 2 + r^2 - r ...) needs an ordering positivity of coefficients cannot settle
    result = PROOFS["ppo.clip_pessimistic_bound"](objective=lambda r, A, eps: sp.Min(r * A, (r - eps) ** 2 * A))
    assert result.status == "inconclusive" and "cannot order" in result.counterexample


def test_linear_actor_critic_rejects_unknown_kinds():
    with pytest.raises(ValueError, match="categorical"):
        ref.LinearActorCritic(3, 2, kind="beta")


@pytest.mark.parametrize("declared", [{"value_loss_factor": "half"}, {"dual_clip": "yes"}, {"kl_stop": "sometimes"}])
def test_malformed_conventions_are_load_errors(declared):
    candidate = Module(RLSPEC_CONVENTIONS=declared, ppo_value_loss=ref.ppo_value_loss, ppo_clip_loss=ref.ppo_clip_loss)
    with pytest.raises(LoadError, match=f"{next(iter(declared))} takes "):
        run_conformance(candidate, clauses="PPO-VALUE-LOSS,PPO-CLIP-LOSS-VALUE")


def test_a_loss_whose_graph_was_already_used_is_an_error():
    def entropy_loss(entropy, coef):
        loss = -coef * entropy.mean()
        loss.backward()  # frees the graph the suite needs
        return loss

    result = run_conformance(Module(ppo_entropy_loss=entropy_loss), clauses="PPO-ENTROPY-BONUS-SIGN")["PPO-ENTROPY-BONUS-SIGN"]
    assert result.status == "error" and "autograd cannot differentiate" in result.message


def test_non_numeric_diagnostics_are_errors():
    update = lambda **k: {**good_update(**k), "ratios": "one"}
    result = run_conformance(Module(ppo_update=update), clauses="PPO-UPDATE-FIRST-RATIOS-ONE")["PPO-UPDATE-FIRST-RATIOS-ONE"]
    assert result.status == "error" and "1-D array of numbers" in result.message


# ---------------------------------------------------------------------------------------------
# the update loop, observed: the recording, the declarations, real code through a name mapping

REALCODE = Path(__file__).parent / "realcode"
UPDATE = "PPO-UPDATE-*"


def test_the_recording_sees_rows_steps_and_groups():
    """A hand-written loop: two minibatches, the actor and critic forwards separate; each step's minibatch is the rows
    of the forwards that fed it, in order; no-grad forwards feed nothing; the two parameter groups are the actor's
    and the critic's; the gradient is recorded after clipping."""
    args = checks.UpdateCase("gaussian", n=6, seed=1).arguments("float64", checks.BASE_CONFIG)
    policy, optimizer, obs = args["policy"], args["optimizer"], args["obs"]
    assert [len(g["params"]) for g in optimizer.param_groups] == [2, 1]  # actor.weight and log_std; critic.weight
    for rows in ([4, 1, 0], [2, 5, 3]):
        with torch.no_grad():
            policy(obs)  # a KL evaluation on the whole batch: no gradient
        dist, _ = policy(obs[rows])
        _, values = policy(obs[rows])
        loss = -dist.log_prob(args["actions"][rows]).sum(-1).mean() + (values**2).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1e-3)
        optimizer.step()
    recording = optimizer.recording
    assert [recording.step_rows(k).tolist() for k in range(2)] == [[4, 1, 0], [2, 5, 3]]
    assert [len(s.forwards) for s in recording.steps] == [2, 2] and len(recording.forwards) == 6
    norm = math.sqrt(sum(float(np.sum(g**2)) for g in recording.steps[0].grads.values()))
    assert norm == pytest.approx(1e-3, rel=1e-5)
    before, after = recording.steps[1].before, recording.steps[1].after
    assert np.allclose(after["critic.weight"], before["critic.weight"] - 0.5 * recording.steps[1].grads["critic.weight"])


def test_the_optimizer_has_torch_optims_surface():
    args = checks.UpdateCase("categorical", n=4, seed=0).arguments("float64", checks.BASE_CONFIG)
    optimizer = args["optimizer"]
    state = optimizer.state_dict()
    assert [g["params"] for g in state["param_groups"]] == [[0], [1]]
    for group in optimizer.param_groups:
        group["lr"] = 0.1  # a learning-rate schedule
    optimizer.load_state_dict(state)
    assert [g["lr"] for g in optimizer.param_groups] == [0.5, 0.5]
    import copy

    twin = copy.deepcopy(args["policy"])  # a frozen old policy: its forwards are not the update's
    twin(args["obs"])
    assert twin.recording is None and not optimizer.recording.forwards


def test_an_update_that_returns_nothing_is_judged_from_the_recording():
    def silent(**kwargs):
        ref.ppo_update(**kwargs)  # the same update, its diagnostics dropped

    run = run_conformance(Module(ppo_update=silent, RLSPEC_ARRAY="torch"), clauses=UPDATE)
    assert {r.status for r in run.results} == {"pass"}, [(r.id, r.message) for r in run.failures]


@pytest.mark.parametrize("adapter", ["ppo_single_file_adapter.py", "ppo_single_file_adapter_diagnostics.py"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_single_file_update_passes_through_a_name_mapping(adapter, dtype):
    """tests/realcode: the update as a single-file script writes it, adapted by renaming only (and, for comparison, by
    the instrumentation the diagnostics protocol needed); docs/adapting-real-code.md walks through it."""
    run = run_conformance(str(REALCODE / adapter), clauses=UPDATE, dtype=dtype)
    assert {r.status for r in run.results} == {"pass"}, [(r.id, r.message) for r in run.failures]


def test_a_nan_step_is_named_when_the_update_then_raises(tmp_path):
    """Without its one-sample guard the single-file update normalises a lone advantage to NaN; its next forward raises,
    and the error says which step made the parameters non-finite."""
    source = (REALCODE / "ppo_single_file.py").read_text(encoding="utf-8")
    (tmp_path / "ppo_single_file_unguarded.py").write_text(source.replace("if args.norm_adv and len(mb_inds) > 1:", "if args.norm_adv:"))
    adapter = (REALCODE / "ppo_single_file_adapter.py").read_text(encoding="utf-8")
    (tmp_path / "adapter.py").write_text(adapter.replace("import ppo_single_file as code", "import ppo_single_file_unguarded as code"))
    result = run_conformance(str(tmp_path / "adapter.py"), clauses="PPO-UPDATE-STEP-GRADIENTS")["PPO-UPDATE-STEP-GRADIENTS"]
    assert result.status == "error" and "a one-sample minibatch normalised with the unbiased std is 0/0" in result.message


def test_the_kl_tolerance_keeps_the_second_order_term():
    """logp_old the policy's own, rounded to float32: the exact k3 is 0 and the first-order term expm1(x) e vanishes,
    but a candidate's k3 is about x^2 / 2 ~ 1e-16; the e^2 / 2 term covers it (the old bound collapsed to 1e-300)."""
    case = checks.UpdateCase("categorical", n=6, seed=5)
    args = case.arguments("float64", checks.BASE_CONFIG)
    run = checks.UpdateRun(case, dict(checks.BASE_CONFIG), args["optimizer"],
                           {k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in args.items() if k in
                            ("obs", "actions", "logp_old", "advantages", "returns", "values_old")},
                           None, None, None, None, "", 2.0**-24)
    params, rows = args["optimizer"].snapshots[0], np.arange(6)
    exact, tol = checks.minibatch_kl(run, params, rows)
    logp = args["logp_old"]
    x = logp - logp.float().double()
    reported = float((torch.expm1(x) - x).mean())
    assert exact == 0.0 and abs(reported) > 1e-20 and abs(reported - exact) <= tol < 1e-6


def test_value_clipping_declared_absent_is_not_applicable():
    def unclipped(**kwargs):
        return ref.ppo_update(**{**kwargs, "config": {**kwargs["config"], "value_clip_eps": None}})

    declared = Module(ppo_update=unclipped, RLSPEC_CONVENTIONS={"value_clipping": "none"})
    result = run_conformance(declared, clauses="PPO-UPDATE-VALUE-CLIPPING")["PPO-UPDATE-VALUE-CLIPPING"]
    assert result.status == "not-provided" and result.message == "not-applicable: value clipping declared absent (value_clipping = 'none')"
    result = run_conformance(Module(ppo_update=unclipped), clauses="PPO-UPDATE-VALUE-CLIPPING")["PPO-UPDATE-VALUE-CLIPPING"]
    assert result.status == "fail" and "not clipped against the stored values_old" in result.cause


def test_a_categorical_only_update_is_judged_on_categorical_batches():
    def categorical_only(**kwargs):
        if kwargs["policy"].kind != "categorical":
            raise NotImplementedError("discrete actions only")
        return ref.ppo_update(**kwargs)

    declared = Module(ppo_update=categorical_only, RLSPEC_CONVENTIONS={"ppo_update_policy_families": ["categorical"]})
    run = run_conformance(declared, clauses=UPDATE)
    assert {r.status for r in run.results} == {"pass"}, [(r.id, r.message) for r in run.failures]
    assert all("categorical only (ppo_update_policy_families)" in " ".join(r.notes) for r in run.results)
    assert not run_conformance(Module(ppo_update=categorical_only), clauses="PPO-UPDATE-FIRST-STEP-GRADIENT").ok


def test_an_update_that_always_normalises_declares_it():
    def always(**kwargs):
        return ref.ppo_update(**{**kwargs, "config": {**kwargs["config"], "normalize_advantages": True}})

    declared = Module(ppo_update=always, RLSPEC_CONVENTIONS={"advantage_normalization_switch": "always"})
    run = run_conformance(declared, clauses=UPDATE)
    assert {r.status for r in run.results} == {"pass"}, [(r.id, r.message) for r in run.failures]
    assert any("advantage_normalization_switch" in note for note in run["PPO-UPDATE-FIRST-RATIOS-ONE"].notes)
    assert run_conformance(Module(ppo_update=always), clauses="PPO-UPDATE-FIRST-RATIOS-ONE")["PPO-UPDATE-FIRST-RATIOS-ONE"].status == "fail"


def drop_last_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    """Each epoch: floor(B / size) minibatches of a fresh permutation (a sampler with drop_last)."""
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    generator = torch.Generator().manual_seed(config["seed"])
    if config["normalize_advantages"]:
        advantages = ref.normalize_advantages(advantages)
    for _ in range(config["epochs"]):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n - size + 1, size):
            idx = order[start : start + size]
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            loss = (ref.ppo_clip_loss(logp, logp_old[idx], advantages[idx], eps) + config["vf_coef"] * ref.ppo_value_loss(values, returns[idx])
                    - config["ent_coef"] * entropy.mean())
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()


def test_a_dropped_remainder_is_declared():
    declared = Module(ppo_update=drop_last_update, RLSPEC_CONVENTIONS={"minibatch_remainder": "dropped", "value_clipping": "none"})
    assert run_conformance(declared, clauses="PPO-UPDATE-MINIBATCHES")["PPO-UPDATE-MINIBATCHES"].status == "pass"
    result = run_conformance(Module(ppo_update=drop_last_update), clauses="PPO-UPDATE-MINIBATCHES")["PPO-UPDATE-MINIBATCHES"]
    assert result.status == "fail" and "declare minibatch_remainder = 'dropped'" in result.cause


@pytest.mark.parametrize("remainder, sizes", [("kept", [3, 3, 2]), ("dropped", [3, 3]), ("merged", [3, 5]), ("balanced", [3, 3, 2])])
def test_the_remainder_conventions(remainder, sizes):
    assert checks.minibatch_sizes(remainder, 8, 3) == sizes
    assert checks.minibatch_sizes(remainder, 6, 3) == [3, 3] and checks.minibatch_sizes(remainder, 2, 3) == ([2] if remainder != "dropped" else [])


def test_the_stop_rules_compare_the_declared_statistic_at_the_declared_place():
    kls = [(0.1, 0.0), (0.3, 0.0), (0.2, 0.0), (0.6, 0.0)]  # two epochs of two minibatches
    last, mean = checks.StopRule("epoch", "last-minibatch"), checks.StopRule("epoch", "epoch-mean")
    assert [v for _, v, _ in last.statistics(kls, 2)] == [0.3, 0.6]
    assert [round(v, 12) for _, v, _ in mean.statistics(kls, 2)] == [0.2, 0.4]
    assert last.stop(kls, 2, 0.25) == 2 and mean.stop(kls, 2, 0.25) == 4  # steps allowed before the stop
    each = checks.StopRule("minibatch", "last-minibatch")
    assert each.stop(kls, 2, 0.25) == 1  # the second minibatch's KL stops the update before its step
    threshold = checks.place_threshold(mean, kls, 2, step_at=0)
    assert mean.stop(kls, 2, threshold) != last.stop(kls, 2, threshold)


@pytest.mark.parametrize("statistic", ["last-minibatch", "epoch-mean"])
def test_the_kl_cases_tell_the_statistics_apart(statistic):
    """Some fixed case of PPO-UPDATE-KL-EARLY-STOP places its threshold where the other statistic stops at another step
    (on the reference's own path, which a correct update shares), so an update reading the other one fails on every seed."""
    from rlspec.checks import load
    from rlspec.checks.runner.verdict import PROFILES, Context
    from rlspec.spec import catalogue

    clause = next(c for c in catalogue.clauses() if c.id == "PPO-UPDATE-KL-EARLY-STOP")
    ctx = Context(load("reference"), clause, PROFILES["quick"], 0, np.float64)
    rule, other = checks.StopRule("epoch", statistic), checks.StopRule("epoch", {"last-minibatch": "epoch-mean"}.get(statistic, "last-minibatch"))
    telling = []
    for case, size, epochs, seed in checks.KL_CASES:
        free = checks.call_update(ctx, case, {"epochs": epochs, "minibatch_size": size, "normalize_advantages": False, "seed": seed,
                                              "clip_eps": 10.0, "target_kl": None})
        kls, per_epoch = checks.step_kls(free), -(-case.n // size)
        threshold = checks.place_threshold(rule, kls, per_epoch, 2)
        telling.append(threshold is not None and rule.stop(kls, per_epoch, threshold) != other.stop(kls, per_epoch, threshold))
    assert any(telling)


def test_a_zero_actor_gradient_tells_a_clip_broken_above_one_from_a_loss_that_misses_the_actor(tmp_path):
    """PPO-UPDATE-STORED-LOGP-OLD runs at clip_eps 10 (no ratio clipped). A zero actor gradient there is not a logp_old
    mistake: the cause reruns the update at clip_eps 1 to tell TorchRL's log-space clip (R45) from a detached loss."""
    mutant = Path(__file__).parent / "mutants" / "ppo_update_log_space_clip_above_one.py"
    result = run_conformance(str(mutant), clauses="PPO-UPDATE-STORED-LOGP-OLD")["PPO-UPDATE-STORED-LOGP-OLD"]
    assert result.status == "fail" and "exactly 0 at clip_eps = 10 and not at clip_eps = 1" in result.cause
    pessimistic = "policy_loss = -torch.stack([ratio * adv, clipped * adv], -1).min(-1).values.mean()"
    source = mutant.read_text()
    assert pessimistic in source
    (tmp_path / "detached.py").write_text(source.replace(pessimistic, "policy_loss = -(ratio.detach() * adv).mean()"))
    result = run_conformance(str(tmp_path / "detached.py"), clauses="PPO-UPDATE-STORED-LOGP-OLD")["PPO-UPDATE-STORED-LOGP-OLD"]
    assert result.status == "fail" and result.cause == "the first step's actor gradient is exactly 0: the policy loss does not reach the actor"

"""The gridworld chapter: the reference DP against independent computations (enumeration, exact
arithmetic, Russell and Norvig's published value), the gymnasium env, the reference trainer, the
numbers in the catalogue, the figures and their claims, and the command line."""

from __future__ import annotations

import hashlib
from fractions import Fraction

import numpy as np
import pytest

from rlspec.checks.clauses import gridworld as grid
from rlspec.reference import gridworld as gw
from rlspec.reference.gae import gae
from rlspec.spec import catalogue

MDP = gw.tabular()
EXACT = gw.tabular(exact=True)
S, A = MDP.P.shape[:2]
UNIFORM = np.full((S, A), 1.0 / A)
RNG = np.random.default_rng(20261202)
POLICIES = [UNIFORM, grid.GREEDY.probs] + [gw.softmax_policy(RNG.normal(size=(S, A))) for _ in range(3)]


# ------------------------------------------------------------------------------------------------
# the MDP and exact dynamic programming


def test_the_world_is_russell_and_norvigs_4x3():
    assert S == 11 and A == 4 and MDP.cells[MDP.start] == (2, 0)
    assert MDP.terminal.sum() == 2 and set(MDP.reward[MDP.terminal]) == {0.96, -1.04}
    np.testing.assert_allclose(MDP.P[~MDP.terminal].sum(axis=2), 1.0, rtol=0, atol=1e-15)
    assert all(sum(row) == 1 for row in EXACT.P[~EXACT.terminal].reshape(-1, S).tolist())  # exactly, in Fractions
    # moving up from the start: 0.8 up, 0.1 right, 0.1 left into the edge (stays)
    up = dict(zip((MDP.cells[s] for s in np.flatnonzero(MDP.P[MDP.start, 0])), MDP.P[MDP.start, 0][MDP.P[MDP.start, 0] > 0]))
    assert up == pytest.approx({(1, 0): 0.8, (2, 1): 0.1, (2, 0): 0.1})


def test_best_return_is_aimas_published_utility():
    """AIMA (3rd ed., fig. 17.3) gives U(1,1) = 0.705 for this world with reward -0.04 and gamma = 1."""
    assert gw.best_episode_return(MDP, 50) == pytest.approx(0.7053, abs=5e-5)
    assert float(gw.best_episode_return(EXACT, 50)) == pytest.approx(gw.best_episode_return(MDP, 50), abs=1e-12)


@pytest.mark.parametrize("k", range(len(POLICIES)))
def test_values_solve_the_bellman_equation_and_advantages_average_to_zero(k):
    policy = POLICIES[k]
    V = gw.state_values(MDP, policy)
    Q = gw.action_values(MDP, V)
    np.testing.assert_allclose(np.where(MDP.terminal, 0, (policy * Q).sum(axis=1)), V, rtol=0, atol=1e-13)
    np.testing.assert_allclose((policy * gw.advantages(MDP, policy)).sum(axis=1), 0.0, rtol=0, atol=1e-13)
    assert np.all(V[MDP.terminal] == 0)


def test_exact_and_float_dynamic_programming_agree():
    exact_policy = grid.UNIFORM.exact
    V = gw.state_values(EXACT, exact_policy)
    assert all(isinstance(v, (Fraction, int)) for v in V)
    np.testing.assert_allclose(grid.exact_float(V), gw.state_values(MDP, UNIFORM), rtol=0, atol=1e-14)
    A_exact = gw.advantages(EXACT, exact_policy)
    assert all(sum(exact_policy[s, a] * A_exact[s, a] for a in range(A)) == 0 for s in range(S))  # exactly 0


@pytest.mark.parametrize("pair", [(0, 1), (1, 0), (2, 3), (4, 0)])
def test_performance_difference_both_ways(pair):
    old, new = POLICIES[pair[0]], POLICIES[pair[1]]
    by_values, by_advantages = gw.performance_difference(MDP, old, new)
    assert by_values == pytest.approx(by_advantages, abs=1e-12)
    assert abs(by_values) > 1e-3  # the pairs really differ


def test_performance_difference_is_exact_in_rationals():
    old, new = grid.UNIFORM.exact, grid.GREEDY.exact
    by_values, by_advantages = gw.performance_difference(EXACT, old, new)
    assert by_values == by_advantages and by_values > 0


# ------------------------------------------------------------------------------------------------
# enumeration and the closed forms


def test_enumeration_covers_every_path_once_with_total_probability_one():
    paths = gw.enumerate_paths(EXACT, grid.UNIFORM.exact, 6)
    assert sum(paths.prob) == 1  # exactly
    assert paths.states.shape == (7, 869) and int(paths.terminated.sum()) == 54
    assert len({tuple(col) for col in paths.states.T}) == 869  # distinct
    ends = paths.states[paths.steps, np.arange(869)]
    assert np.all(EXACT.terminal[ends] == paths.terminated)
    assert np.all(paths.steps[~paths.terminated] == 6)


def _enumerated_moments(policy, critic, lam, horizon):
    """E and E[.^2] of A_hat_0 given (s_0, a), from every path through the reference gae."""
    paths = gw.enumerate_paths(MDP, policy, horizon)
    rollout = grid.enumerated_rollout(paths, critic, lam)
    advantages = gae(*rollout.arguments().values())[0]
    suffix = np.prod(paths.step_prob[1:], axis=0)
    weights = MDP.P[MDP.start][:, paths.states[1]] * suffix  # (A, N)
    return weights @ advantages[0], weights @ advantages[0] ** 2


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
@pytest.mark.parametrize("critic_kind", ["exact", "scaled", "random"])
def test_closed_form_moments_equal_the_enumeration(lam, critic_kind):
    policy = POLICIES[2]
    V = gw.state_values(MDP, policy)
    critic = {"exact": V, "scaled": 0.7 * V, "random": RNG.normal(size=S)}[critic_kind]
    mean, second = gw.gae_moments(MDP, policy, critic, lam, steps=5)
    enum_mean, enum_second = _enumerated_moments(policy, critic, lam, 5)
    np.testing.assert_allclose(mean[MDP.start], enum_mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(second[MDP.start], enum_second, rtol=0, atol=1e-12)
    np.testing.assert_allclose(gw.expected_gae(MDP, policy, critic, lam, steps=5), mean, rtol=0, atol=1e-14)
    if critic_kind == "exact":
        np.testing.assert_allclose(mean, gw.advantages(MDP, policy), rtol=0, atol=1e-12)


@pytest.mark.parametrize("lam", [0.0, 0.8, 0.97])
def test_no_time_limit_is_the_limit_of_long_segments(lam):
    critic = 0.7 * gw.state_values(MDP, UNIFORM)
    E, M = gw.gae_moments(MDP, UNIFORM, critic, lam)
    E_long, M_long = gw.gae_moments(MDP, UNIFORM, critic, lam, steps=3000)
    np.testing.assert_allclose(E, E_long, rtol=0, atol=1e-10)
    np.testing.assert_allclose(M, M_long, rtol=0, atol=1e-10)
    np.testing.assert_allclose(gw.expected_gae(MDP, UNIFORM, critic, lam, moments=False), E, rtol=0, atol=1e-13)


def test_episode_return_equals_the_enumerated_undiscounted_return():
    policy = grid.UNIFORM.exact
    paths = gw.enumerate_paths(EXACT, policy, 6)
    returns = [sum(EXACT.reward[s] for s in col[1 : k + 1]) for col, k in zip(paths.states.T, paths.steps)]
    assert sum(p * g for p, g in zip(paths.prob, returns)) == gw.episode_return(EXACT, policy, 6)


def test_node_weights_sum_to_one_and_recover_the_closed_form():
    nodes = grid.nodes_of(grid.UNIFORM)
    np.testing.assert_allclose(nodes.sum(nodes.entry_weight), 1.0, rtol=0, atol=1e-14)
    paths = grid.paths_of(grid.UNIFORM)
    critic = grid.with_terminal_values(0.7 * gw.state_values(MDP, UNIFORM))
    advantages = gae(*grid.enumerated_rollout(paths, critic, 0.9).arguments().values())[0]
    table = gw.expected_gae_by_steps(MDP, UNIFORM, np.where(MDP.terminal, 0, critic), 0.9, 6)
    np.testing.assert_allclose(nodes.mean(advantages), grid.expected_at_nodes(table, nodes), rtol=0, atol=1e-13)


def test_enumerated_rollout_marks_both_flags_when_a_terminal_meets_the_time_limit():
    paths = grid.paths_of(grid.UNIFORM)
    r = grid.enumerated_rollout(paths, np.zeros(S), 0.5)
    both = r.terminated & r.truncated
    assert both.any() and np.all(np.flatnonzero(both.any(axis=1)) == [5])
    assert r.shape == (7, 869) and not r.truncated[6].any()  # the padding row never ends an episode


# ------------------------------------------------------------------------------------------------
# the gymnasium env and the reference trainer


def test_env_passes_gymnasiums_checker():
    from gymnasium.utils.env_checker import check_env

    from rlspec.checks.kit.gridworld_env import GridworldEnv

    check_env(GridworldEnv(), skip_render_check=True)


def test_env_terminates_at_goal_and_pit_and_truncates_at_the_time_limit():
    from rlspec.checks.kit.gridworld_env import GridworldEnv

    env = GridworldEnv()
    env.reset(seed=3)
    lengths, ends = [], []
    for _ in range(300):
        steps = 0
        while True:
            obs, reward, terminated, truncated, _ = env.step(int(env.np_random.integers(4)))
            steps += 1
            if terminated or truncated:
                break
        assert terminated != truncated
        assert (obs in np.flatnonzero(MDP.terminal)) == terminated
        if truncated:
            assert steps == gw.GRIDWORLD.time_limit
        lengths.append(steps)
        ends.append(reward)
        env.reset()
    assert max(lengths) == gw.GRIDWORLD.time_limit and {0.96, -1.04} <= set(np.round(ends, 12))
    for bad in (7, 1.5, "up"):
        with pytest.raises(ValueError):
            env.step(bad)
    assert env.render().count("@") == 1
    while not env.step(1)[2]:  # right until the goal or the pit (the time limit is 50 steps away)
        pass
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_env_transition_frequencies_match_P():
    from rlspec.checks.kit.gridworld_env import GridworldEnv

    env = GridworldEnv()
    counts = np.zeros(S)
    n = 20000
    for i in range(n):
        env.reset(seed=i)
        obs, *_ = env.step(1)  # right from the start
        counts[obs] += 1
    p = MDP.P[MDP.start, 1]
    # binomial standard deviation sqrt(p (1 - p) / n) <= 0.0036; five of them
    np.testing.assert_allclose(counts / n, p, rtol=0, atol=5 * 0.0036)


def test_reference_trainer_is_deterministic_and_leaves_global_rngs_alone():
    import torch

    from rlspec.checks.kit.gridworld_env import GridworldEnv
    from rlspec.reference.training import train_ppo

    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()
    first = train_ppo(GridworldEnv(), 3, seed=5)
    assert train_ppo(GridworldEnv(), 3, seed=5) == first and len(first) >= 10
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert all(np.array_equal(a, b) for a, b in zip(np.random.get_state(), numpy_state))


def test_reference_trainer_clears_the_bar_on_many_seeds():
    """The yardstick: 12 training seeds, each with a wide margin over both thresholds."""
    import torch

    from rlspec.checks.kit.gridworld_env import GridworldEnv
    from rlspec.reference.training import train_ppo

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs = [np.array(train_ppo(GridworldEnv(), grid.TRAIN_ITERATIONS, seed)) for seed in range(12)]
    finally:
        torch.set_num_threads(threads)
    gains = [r[-grid.LAST:].mean() - r[: grid.FIRST].mean() for r in runs]
    finals = [r[-grid.LAST:].mean() for r in runs]
    assert min(gains) >= 3 * grid.MARGIN
    assert min(finals) >= grid.required_final_return()


def test_return_anchors_and_range():
    uniform, best = grid.return_anchors()
    assert uniform == pytest.approx(-1.3524, abs=1e-4) and best == pytest.approx(0.7053, abs=1e-4)
    assert grid.possible_return_range() == pytest.approx((-3.0, 0.96))


def test_trainer_returning_garbage_is_an_error_not_a_failure(tmp_path):
    from rlspec.checks import run_conformance

    bad, short = tmp_path / "bad_trainer.py", tmp_path / "short_trainer.py"
    bad.write_text("def train_ppo(env, iterations, seed):\n    return [5.0] * 40  # no episode of this env pays 5\n")
    short.write_text("def train_ppo(env, iterations, seed):\n    return [0.0] * 12\n")
    result = run_conformance(str(bad), clauses=["GRID-TRAIN-PPO-IMPROVES"]).results[0]
    assert result.status == "error" and "outside" in result.message
    result = run_conformance(str(short), clauses=["GRID-TRAIN-PPO-IMPROVES"]).results[0]
    assert result.status == "error" and "12 episode returns" in result.message
    words = tmp_path / "words_trainer.py"
    words.write_text("def train_ppo(env, iterations, seed):\n    return 'no returns'\n")
    result = run_conformance(str(words), clauses=["GRID-TRAIN-PPO-IMPROVES"]).results[0]
    assert result.status == "error" and "sequence of episode returns" in result.message


def test_a_trainer_that_gains_too_little_overall_fails_the_average(tmp_path):
    from rlspec.checks import run_conformance

    slow = tmp_path / "slow_trainer.py"  # gains 0.5 on the seed, but ends far below half-way
    slow.write_text("def train_ppo(env, iterations, seed):\n    return [-2.0] * 10 + [-1.5] * 20\n")
    result = run_conformance(str(slow), clauses=["GRID-TRAIN-PPO-IMPROVES"]).results[0]
    assert result.status == "fail" and "half-way" in result.message and "-1.5000" in result.message


# ------------------------------------------------------------------------------------------------
# the catalogue's numbers, the figures, the command line


@pytest.mark.parametrize("clause", [c for c in catalogue.clauses() if c.chapter == "gridworld"], ids=lambda c: c.id)
def test_catalogue_notes_are_generated_from_the_world(clause):
    assert clause.notes == " ".join(grid.gridworld_notes(clause.id).split()), \
        "regenerate the notes of spec/clauses/70_gridworld.toml from gridworld_notes()"


def test_figure_claims_hold_and_can_fail():
    from rlspec.checks.book import figures

    rows = figures.bias_variance_table()
    assert all(holds for _, holds, _ in figures.claims(rows))
    by = {r.lam: r for r in rows}
    assert by[0.0].scaled_bias == pytest.approx(7.725e-3, rel=1e-3) and by[1.0].exact_variance / by[0.0].exact_variance > 700
    doctored = [r.__class__(**{**r.__dict__, "exact_bias_is_zero": r.lam != 0.5}) for r in rows]
    assert not figures.claims(doctored)[0][1]
    rising = [r.__class__(**{**r.__dict__, "scaled_bias": r.scaled_bias * (1 + r.lam)}) for r in rows]
    assert not figures.claims(rising)[1][1]
    assert all(holds for _, holds, _ in figures.clip_claims(np.linspace(0.0, 2.0, 81)[1:]))


def test_rlspec_figures_writes_both_figures_reproducibly(tmp_path, capsys):
    from rlspec.checks.cli import main

    assert main(["figures", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "lambda" in out and "holds" in out
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == ["gae_bias_variance.png", "ppo_clip_objective.png"]
    from rlspec.checks.book import figures

    figures.write_clip_figure(tmp_path / "again.png")
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
    assert digest(tmp_path / "again.png") == digest(tmp_path / "a" / "ppo_clip_objective.png")


def test_explain_prints_the_gridworlds_numbers(capsys):
    from rlspec.checks.cli import main

    assert main(["explain", "GRID-GAE-EXPECTATION-CLOSED-FORM"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # explain wraps the notes
    for number in ("-0.04", "0.99", "869", "H = 6", "c = 0.7", "-1.2562"):
        assert number in out

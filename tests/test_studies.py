"""The studies (rlspec study): each runs at its small size, writes its JSON and figure reproducibly,
and its claims are machinery that can fail: fed wrong measurements, a claim reports not holding."""

from __future__ import annotations

import copy
import hashlib
import json
import sys

import numpy as np
import pytest

from conftest import ROOT
from rlspec.checks import studies
from rlspec.checks.cli import main
from rlspec.checks.studies._core import sign_flip_p

RECOMPUTING_MUTANT = str(ROOT / "tests" / "mutants" / "ppo_update_recomputes_logp_old.py")


@pytest.fixture(scope="module")
def small():
    """Every study's measurements at its small size, run once for the module."""
    out = {}
    for name in studies.NAMES:
        out[name] = studies.run(name, size="small")
    return out


def verdicts(name: str, measured: dict) -> dict[str, bool]:
    return {c.id: c.holds for c in studies.module(name).claims(measured)}


def doctor(result, **changes):
    """A deep copy of the reference subject's measurements with ``changes`` applied (key paths split on '/')."""
    m = copy.deepcopy(result.data["reference"])
    for path, value in changes.items():
        *parents, last = path.split("/")
        node = m
        for key in parents:
            node = node[key]
        node[last] = value(node[last]) if callable(value) else value
    return m


# ------------------------------------------------------------------------------------------------
# the registry and the results


def test_every_study_declares_what_the_book_and_the_cli_need():
    assert len(studies.NAMES) == 6
    for module in studies.studies():
        assert module.NAME in studies.NAMES and module.TITLE
        assert module.ILLUSTRATES["chapter"] and module.ILLUSTRATES["clauses"]
        from rlspec.spec import catalogue

        for clause in module.ILLUSTRATES["clauses"]:
            catalogue.by_id(clause)  # a clause the book can link to
        assert module.SOURCES and all("arXiv" in s or "19" in s or "20" in s for s in module.SOURCES)
        assert not any("000_" in s or "seed" in s.lower() for s in module.SOURCES)
        assert set(module.SIZES) == {"default", "small"} and module.SEEDS["small"] >= module.MIN_SEEDS


@pytest.mark.parametrize("name", studies.NAMES)
def test_each_study_runs_small_with_claims_a_table_and_json(small, name):
    result = small[name]
    assert result.claims and result.table.rows
    for claim in result.claims:
        assert claim.criterion and claim.measured and claim.source
    payload = json.loads(result.to_json())
    assert payload["study"] == name and payload["illustrates"]["chapter"]
    assert payload["holds"] == all(c["holds"] for c in payload["claims"])
    assert payload["candidate"] == "reference" and "reference" in payload["data"]
    assert len(payload["table"]["rows"]) == len(result.table.rows)


# ------------------------------------------------------------------------------------------------
# the claims are machinery: wrong data, wrong verdict


def test_clip_fraction_claims_fail_on_wrong_data(small):
    r = small["clip-fraction"]
    assert verdicts("clip-fraction", r.data["reference"])["first-minibatch-zero"]
    bad = doctor(r, **{"epochs/4/first_ratio_deviation": lambda v: [1e-3] + v[1:]})
    assert not verdicts("clip-fraction", bad)["first-minibatch-zero"]
    # a clip fraction falling on every seed from epoch to epoch
    seeds = len(r.data["reference"]["epochs"]["16"]["clip_fraction"])
    falling = [list(np.linspace(0.9, 0.1, 16) + 0.001 * s) for s in range(seeds)]
    assert not verdicts("clip-fraction", doctor(r, **{"epochs/16/clip_fraction": falling}))["non-decreasing"]
    rising = [list(np.linspace(0.0, 0.5, 16) + 0.001 * s) for s in range(seeds)]
    v = verdicts("clip-fraction", doctor(r, **{"epochs/16/clip_fraction": rising, "epochs/4/clip_fraction": [x[:4] for x in rising]}))
    assert v["non-decreasing"] and v["later-epochs-above-0.3"]
    low = [list(np.linspace(0.0, 0.2, 16)) for _ in range(seeds)]
    assert not verdicts("clip-fraction", doctor(r, **{"epochs/16/clip_fraction": low}))["later-epochs-above-0.3"]


def test_lambda_bake_off_claims_fail_on_wrong_data(small):
    r = small["lambda-bake-off"]
    v = verdicts("lambda-bake-off", r.data["reference"])
    assert v["bias-falls"] and v["interior-optimum"] and v["optimum-moves-to-one"]
    c = list(r.data["reference"]["scales"])[1]
    assert not verdicts("lambda-bake-off", doctor(r, **{f"scales/{c}/bias": lambda b: np.asarray(b)[::-1]}))["bias-falls"]
    rising = {f"scales/{k}/variance": np.linspace(1e-3, 1.0, len(r.data["reference"]["lambdas"])) for k in r.data["reference"]["scales"]}
    assert verdicts("lambda-bake-off", doctor(r, **rising))["variance-rises"]
    falls = {f"scales/{c}/variance": lambda y: np.asarray(y)[::-1]}
    assert not verdicts("lambda-bake-off", doctor(r, **falls))["variance-rises"]
    at_zero = {f"scales/{c}/mse": lambda y: np.linspace(0.0, 1.0, len(y))}  # minimum at lambda = 0
    v = verdicts("lambda-bake-off", doctor(r, **at_zero))
    assert not v["interior-optimum"] and not v["optimum-moves-to-one"]


def test_stale_logp_old_claims_fail_on_wrong_data(small):
    r = small["stale-logp-old"]
    assert all(verdicts("stale-logp-old", r.data["reference"]).values())
    n = len(r.data["reference"]["vanilla_difference"])
    assert not verdicts("stale-logp-old", doctor(r, ratio_deviation_recomputed=[0.3] * n))["ratios-one"]
    assert not verdicts("stale-logp-old", doctor(r, vanilla_difference=[1e-4] * n))["equals-vanilla-pg"]
    assert not verdicts("stale-logp-old", doctor(r, clip_fraction_stored_last_epoch=[0.0] * n))["stored-clips"]
    swapped = doctor(r, kl_stored=r.data["reference"]["kl_recomputed"], kl_recomputed=r.data["reference"]["kl_stored"])
    assert not verdicts("stale-logp-old", swapped)["moves-further"]


def test_explained_variance_claims_fail_on_wrong_data(small):
    r = small["explained-variance"]
    m = r.data["reference"]
    assert verdicts("explained-variance", m)["normalisation-hides"]
    high = lambda ev: (np.asarray(ev) * 0 + 0.9).tolist()
    v = verdicts("explained-variance", doctor(r, **{"healthy/ev": high, "broken/ev": high}))
    assert v["healthy-above"] and not v["broken-below"]
    assert not verdicts("explained-variance", doctor(r, **{"healthy/ev": lambda ev: (np.asarray(ev) * 0).tolist()}))["healthy-above"]
    assert not verdicts("explained-variance", doctor(r, **{"broken/norm_mean": lambda x: (np.asarray(x) + 1e-3).tolist()}))["normalisation-hides"]
    # the critic always helps, by a lot, on both sides of the threshold: "not helping below 0.3" fails
    helps = {f"{arm}/cos_critic": lambda c: (np.asarray(c) * 0 + 0.9).tolist() for arm in ("healthy", "broken")}
    helps.update({f"{arm}/cos_no_critic": lambda c: (np.asarray(c) * 0).tolist() for arm in ("healthy", "broken")})
    spread = lambda ev: np.tile(np.linspace(-0.5, 0.9, np.asarray(ev).shape[1]), (np.asarray(ev).shape[0], 1)).tolist()
    helps.update({"healthy/ev": spread, "broken/ev": spread})
    assert not verdicts("explained-variance", doctor(r, **helps))["threshold"]
    # and helps only above it: the claim holds
    m2 = doctor(r, **{"healthy/ev": spread, "broken/ev": spread})
    for arm in ("healthy", "broken"):
        ev = np.asarray(m2[arm]["ev"])
        m2[arm]["cos_no_critic"] = np.zeros_like(ev).tolist()
        m2[arm]["cos_critic"] = np.where(ev >= 0.3, 0.5 + 0.01 * np.arange(ev.shape[0])[:, None], -0.1).tolist()
    assert verdicts("explained-variance", m2)["threshold"]


def test_kl_penalty_vs_clip_claims_fail_on_wrong_data(small):
    r = small["kl-penalty-vs-clip"]
    v = verdicts("kl-penalty-vs-clip", r.data["reference"])
    assert v["beta-rule"]
    wrong_beta = doctor(r, **{"penalty/beta": lambda b: [[x * (1.5 if k == 2 else 1.0) for k, x in enumerate(row)] for row in b]})
    assert not verdicts("kl-penalty-vs-clip", wrong_beta)["beta-rule"]
    on_target = doctor(r, **{"penalty/kl": lambda kls: [[0.01] * len(k) for k in kls]})
    assert verdicts("kl-penalty-vs-clip", on_target)["kl-near-target"]
    far = doctor(r, **{"penalty/kl": lambda kls: [[0.1] * len(k) for k in kls]})
    assert not verdicts("kl-penalty-vs-clip", far)["kl-near-target"]
    worse = doctor(r, **{"clip/final_return": lambda x: (np.asarray(r.data["reference"]["penalty"]["final_return"]) - 0.1).tolist()})
    assert not verdicts("kl-penalty-vs-clip", worse)["clip-not-worse"]


def test_baseline_ablation_claims_fail_on_wrong_data(small):
    r = small["baseline-ablation"]
    m = r.data["reference"]
    unshifted = {arm: m[f"none | {arm}"]["final_return"] for arm in ("no baseline", "baseline")}
    same = {f"{c} | {arm}/final_return": unshifted[arm] for c in ("rewards +100", "returns +100") for arm in unshifted}
    v = verdicts("baseline-ablation", doctor(r, **same))
    assert v["baseline-unchanged"] and not v["no-baseline-degrades"]
    collapsed = {f"{c} | {arm}/final_return": [m["uniform_return"]] * len(unshifted[arm]) for c in ("rewards +100", "returns +100") for arm in unshifted}
    v = verdicts("baseline-ablation", doctor(r, **collapsed))
    assert v["no-baseline-degrades"] and not v["baseline-unchanged"]
    n = len(unshifted["baseline"])
    equal = {f"{c} | {arm}/grad_norm_variance": [1.0 + 0.01 * s for s in range(n)] for c in studies.module("baseline-ablation").CONDITIONS for arm in unshifted}
    assert not verdicts("baseline-ablation", doctor(r, **equal))["baseline-cuts-variance"]
    lower = dict(equal)
    lower.update({f"{c} | baseline/grad_norm_variance": [0.1] * n for c in studies.module("baseline-ablation").CONDITIONS})
    assert verdicts("baseline-ablation", doctor(r, **lower))["baseline-cuts-variance"]
    lower.update({"none | baseline/grad_norm_variance": [1.0 + 0.01 * s for s in range(n)]})  # unshifted: reported, not judged
    assert verdicts("baseline-ablation", doctor(r, **lower))["baseline-cuts-variance"]


def test_sign_flip_p_is_exact():
    assert sign_flip_p([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(1 / 32)
    assert sign_flip_p([-1.0, -2.0, -3.0]) == 1.0
    assert sign_flip_p([0.0, 0.0]) == 1.0
    assert 0.3 < sign_flip_p([1.0, -1.0, 2.0, -2.0]) < 0.8


# ------------------------------------------------------------------------------------------------
# a candidate beside the reference


def test_a_candidate_that_recomputes_logp_old_is_shown_beside_the_reference():
    from rlspec.checks.runner.loader import load

    result = studies.run("stale-logp-old", load(RECOMPUTING_MUTANT), size="small")
    assert result.operations == {"ppo_update": "candidate", "reinforce_loss": "reference"}
    assert set(result.data) == {"candidate", "reference"}
    judged = {c.id: c.holds for c in result.claims if not c.id.startswith("reference:")}
    reference = {c.id: c.holds for c in result.claims if c.id.startswith("reference:")}
    assert not judged["moves-further"]  # its "stored" update is vanilla PG: it moves exactly as far
    assert all(reference.values()) and not result.holds
    assert [c.id for c in result.differences] == ["moves-further"] and not result.findings
    assert {row[0] for row in result.table.rows} == {"candidate", "reference"}


def test_a_candidate_without_the_operations_gets_the_reference_and_a_note():
    from rlspec.checks.runner.loader import load

    result = studies.run("lambda-bake-off", load(str(ROOT / "tests" / "mutants" / "gae_truncation_as_terminal.py")), size="small")
    assert set(result.data) == {"reference"} and result.notes and "exact" in result.notes[0]


# ------------------------------------------------------------------------------------------------
# the command line


def test_study_list_and_errors(capsys):
    assert main(["study", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in studies.NAMES)
    assert main(["study", "clip-fractoin"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "clip-fraction" in err
    assert main(["study", "stale-logp-old", "--seeds", "2"]) == 2
    assert "--seeds >= 5" in capsys.readouterr().err
    assert main(["study"]) == 2
    capsys.readouterr()
    assert main(["study", "stale-logp-old", "--candidate", "no_such_module_here"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_study_out_writes_json_and_png_reproducibly(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
    for folder in ("a", "b"):
        code = main(["study", "stale-logp-old", "--size", "small", "--out", str(tmp_path / folder)])
        assert code == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "holds" in out and "wrote" in out
    for name in ("stale-logp-old.json", "stale-logp-old.png"):
        assert digest(tmp_path / "a" / name) == digest(tmp_path / "b" / name)
    payload = json.loads((tmp_path / "a" / "stale-logp-old.json").read_text())
    assert payload["figure"] == "stale-logp-old.png" and payload["illustrates"]["chapter"] == "ppo"


def test_a_claim_refuted_on_the_reference_is_a_finding_and_exits_0(tmp_path, capsys):
    assert main(["study", "lambda-bake-off", "--size", "small", "--out", str(tmp_path)]) == 0  # the variance dips near lambda = 0
    out = capsys.readouterr().out
    assert "REFUTED (a finding" in out and "refuted on rlspec's gridworld (findings): variance-rises" in out
    payload = json.loads((tmp_path / "lambda-bake-off.json").read_text())
    assert payload["findings"] == ["variance-rises"] and payload["candidate_differs"] == []
    assert {c["id"]: c["verdict"] for c in payload["claims"]}["variance-rises"] == "refuted"


def test_a_candidate_that_breaks_a_claim_the_reference_meets_exits_1(capsys):
    assert main(["study", "stale-logp-old", "--size", "small", "--candidate", RECOMPUTING_MUTANT]) == 1
    out = capsys.readouterr().out
    assert "CANDIDATE DIFFERS" in out and "the candidate breaks: moves-further" in out


def test_the_figure_marks_the_claims_it_tests(tmp_path):
    pytest.importorskip("matplotlib")
    from rlspec.checks.studies import _plot

    claims = [studies.Claim("a", "first claim", "src", "rule", True, "1", "holds"),
              studies.Claim("b", "second claim", "src", "rule", False, "2", "refuted")]
    draw = lambda axes, data: [ax.plot([0, 1], [0, 1]) for ax in axes]
    plain, marked = _plot.render(draw, {}, tmp_path / "plain.png"), _plot.render(draw, {}, tmp_path / "marked.png", claims=claims)
    from matplotlib.image import imread

    assert imread(marked).shape[0] > imread(plain).shape[0]  # a band of claim lines under the axes


def test_study_out_without_matplotlib_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    assert main(["study", "stale-logp-old", "--size", "small", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matplotlib" in err
    assert not any(tmp_path.iterdir())

"""Two figures of the PPO and GAE chapters, recomputed from the reference: ``rlspec figures OUT/``.

1. ``ppo_clip_objective.png``: the clipped objective min(r A, clip(r, 1 - eps, 1 + eps) A) of one
   sample against the ratio r, for A > 0 and A < 0, with the regions where its gradient is zero
   shaded (computed with autograd through the reference ``ppo_clip_loss``).
2. ``gae_bias_variance.png``: on the gridworld, the bias and the variance of the GAE advantage at the
   start state against lambda, for the exact critic V^pi and the scaled critic c V^pi, in closed form
   (``rlspec.reference.gridworld``; no time limit, no sampling).

The claims behind them are checked, not just drawn (``claims``): the exact critic's bias is
exactly 0 at every lambda (rational arithmetic); the scaled critic's bias stays flat and then falls
to exactly 0 at lambda = 1; the variance rises by orders of magnitude from lambda = 0 to 1; and the
clip objective is flat exactly where the clip gradient table says. Matplotlib is imported only
here (the ``figures`` extra) and used through its object API with the Agg canvas: no pyplot, no
global backend or rcParams change. The PNGs carry no timestamp or version string, so the same inputs
give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ...reference import gridworld as gw

CLIP_EPS = 0.2
FINE_LAMBDAS = np.linspace(0.0, 1.0, 101)
FLAT_UP_TO = 0.9  # the scaled critic's bias counts as flat on lambda <= 0.9 ...
FLAT_WITHIN = 0.05  # ... if it stays within 5% of its value at lambda = 0
MIN_VARIANCE_RATIO = 100.0  # variance(lambda = 1) / variance(lambda = 0): at least two orders of magnitude


@dataclass(frozen=True)
class Row:
    lam: float
    exact_bias: float  # start-state bias with V^pi (policy-weighted RMS over actions)
    scaled_bias: float  # ... with c V^pi
    exact_variance: float  # Var[A_hat_0 | s_0] with V^pi
    scaled_variance: float
    exact_bias_is_zero: bool  # in rational arithmetic
    scaled_bias_is_zero: bool


def _exact_bias_vector(mdp, policy, critic, lam: Fraction, advantages) -> np.ndarray:
    """E[A_hat_0 | s_0, a] minus its policy mean, minus A^pi(s_0, a): exact (Fractions), no time limit."""
    s0 = mdp.start
    mean = gw.expected_gae(mdp, policy, critic, lam, steps=None, moments=False)[s0]
    return mean - (policy[s0] * mean).sum() - advantages[s0]


def bias_variance_table(lambdas=gw.GRIDWORLD.lambdas, world: gw.Gridworld = gw.GRIDWORLD, exact: bool = True) -> list[Row]:
    """The start-state bias and variance for each lambda, uniform policy, exact and scaled critics;
    ``exact``: also decide in rational arithmetic whether each bias is exactly 0 (else False)."""
    mdp, exact_mdp = gw.tabular(world), gw.tabular(world, exact=True)
    S, A = mdp.P.shape[:2]
    policy = np.full((S, A), 1.0 / A)
    exact_policy = np.full((S, A), Fraction(1, A), dtype=object)
    V, V_exact = gw.state_values(mdp, policy), gw.state_values(exact_mdp, exact_policy)
    A_exact = gw.advantages(exact_mdp, exact_policy)
    c, c_exact = world.critic_scale, Fraction(str(world.critic_scale))
    rows = []
    for lam in lambdas:
        zero = lambda critic: exact and bool(np.all(_exact_bias_vector(exact_mdp, exact_policy, critic, Fraction(str(lam)), A_exact) == 0))
        rows.append(Row(
            lam=float(lam),
            exact_bias=gw.start_state_bias(mdp, policy, V, lam),
            scaled_bias=gw.start_state_bias(mdp, policy, c * V, lam),
            exact_variance=gw.start_state_variance(mdp, policy, V, lam),
            scaled_variance=gw.start_state_variance(mdp, policy, c * V, lam),
            exact_bias_is_zero=zero(V_exact),
            scaled_bias_is_zero=zero(c_exact * V_exact),
        ))
    return rows


def claims(rows: list[Row]) -> list[tuple[str, bool, str]]:
    """The claims about the bias/variance figure, each ``(claim, holds, numbers)``."""
    by = {r.lam: r for r in rows}
    flat = [r.scaled_bias for r in rows if r.lam <= FLAT_UP_TO]
    tail = [r.scaled_bias for r in rows if r.lam >= FLAT_UP_TO]
    exact_ratio = by[1.0].exact_variance / by[0.0].exact_variance
    scaled_ratio = by[1.0].scaled_variance / by[0.0].scaled_variance
    return [
        ("with the exact critic the bias is exactly 0 at every lambda", all(r.exact_bias_is_zero for r in rows),
         f"rational arithmetic at lambda in {[r.lam for r in rows]}"),
        (f"the scaled critic's bias is flat for lambda <= {FLAT_UP_TO} (within {FLAT_WITHIN:.0%})",
         max(flat) <= (1 + FLAT_WITHIN) * flat[0] and min(flat) >= (1 - FLAT_WITHIN) * flat[0],
         f"{min(flat):.3e} .. {max(flat):.3e}"),
        (f"then falls, reaching exactly 0 at lambda = 1", all(a > b for a, b in zip(tail, tail[1:])) and by[1.0].scaled_bias_is_zero,
         " > ".join(f"{b:.2e}" for b in tail)),
        (f"the variance rises by at least {MIN_VARIANCE_RATIO:g}x from lambda = 0 to 1", min(exact_ratio, scaled_ratio) >= MIN_VARIANCE_RATIO,
         f"exact critic x{exact_ratio:.0f} ({np.log10(exact_ratio):.2f} decades), scaled x{scaled_ratio:.0f} ({np.log10(scaled_ratio):.2f} decades)"),
    ]


def clip_objective(ratios: np.ndarray, advantage: float, eps: float = CLIP_EPS):
    """``(objective, gradient)`` of one sample at each ratio: -ppo_clip_loss and its d / d r.

    The objective is the reference loss of each one-sample batch; the gradient comes from one batched
    call (the loss is a mean over independent samples, so B times its gradient is each sample's).
    """
    import torch

    from ...reference.ppo import ppo_clip_loss

    B = len(ratios)
    ratio = torch.tensor(np.asarray(ratios, dtype=np.float64), requires_grad=True)
    logp_old, adv = torch.zeros(B, dtype=torch.float64), torch.full((B,), float(advantage), dtype=torch.float64)
    (gradient,) = torch.autograd.grad(-B * ppo_clip_loss(torch.log(ratio), logp_old, adv, eps), ratio)
    with torch.no_grad():  # r = exp(logp_new - logp_old) with logp_old = 0
        objective = [-ppo_clip_loss(torch.log(ratio[i : i + 1]), logp_old[:1], adv[:1], eps).item() for i in range(B)]
    return np.array(objective), gradient.numpy()


def clip_claims(ratios: np.ndarray, eps: float = CLIP_EPS) -> list[tuple[str, bool, str]]:
    """The gradient is zero exactly past the clip in the advantage's direction (the clip gradient table)."""
    out = []
    for advantage, past in ((1.0, ratios > 1 + eps), (-1.0, ratios < 1 - eps)):
        _, grad = clip_objective(ratios, advantage, eps)
        out.append((f"A = {advantage:+g}: the objective is flat exactly where r is past the clip on the side A favours",
                    bool(np.array_equal(grad == 0, past)), f"{int(past.sum())} of {len(ratios)} ratios flat"))
    return out


def _figure(width: float = 9.0, height: float = 3.6):
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)  # attaches itself: savefig renders with Agg whatever pyplot's backend is
    return fig, fig.subplots(1, 2)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})  # no version string: reproducible bytes
    return path


@matplotlib.rc_context({"font.size": 9})
def write_clip_figure(path: Path, eps: float = CLIP_EPS) -> Path:
    fig, axes = _figure()
    ratios = np.linspace(0.0, 2.0, 401)[1:]
    for ax, advantage in zip(axes, (1.0, -1.0)):
        objective, grad = clip_objective(ratios, advantage, eps)
        ax.plot(ratios, ratios * advantage, ":", color="0.5", label="unclipped r A")
        ax.plot(ratios, objective, color="C0", label="min(r A, clip(r) A)")
        flat = ratios[grad == 0]  # one interval: past the clip on the side the advantage favours
        ax.axvspan(flat.min(), flat.max(), color="C1", alpha=0.2, label="gradient 0 (flat)")
        for edge in (1 - eps, 1 + eps):
            ax.axvline(edge, color="0.7", lw=0.8)
        ax.set(title=f"A {'> 0' if advantage > 0 else '< 0'} (A = {advantage:+g}, eps = {eps})", xlabel="ratio r",
               ylabel="clipped objective")
        ax.legend(loc="upper left" if advantage > 0 else "lower left", fontsize=7)
    return _save(fig, path)


@matplotlib.rc_context({"font.size": 9})
def write_bias_variance_figure(path: Path, rows: list[Row]) -> Path:
    fig, (left, right) = _figure()
    fine = bias_variance_table(FINE_LAMBDAS, exact=False)  # smooth curves; the claims use ``rows``
    lam = [r.lam for r in fine]
    c = gw.GRIDWORLD.critic_scale
    left.plot(lam, [r.exact_bias for r in fine], color="C0", label="exact critic V^pi")
    left.plot(lam, [r.scaled_bias for r in fine], color="C3", label=f"scaled critic {c} V^pi")
    left.set(title="bias of E[A_hat_0 | s_0, a] (centred) vs A^pi", xlabel="lambda", ylabel="policy-weighted RMS over actions")
    right.semilogy(lam, [r.exact_variance for r in fine], color="C0", label="exact critic V^pi")
    right.semilogy(lam, [r.scaled_variance for r in fine], color="C3", label=f"scaled critic {c} V^pi")
    right.set(title="variance of A_hat_0 at the start state", xlabel="lambda", ylabel="Var (log scale)")
    for ax in (left, right):
        ax.legend(fontsize=7)
    return _save(fig, path)


def table_text(rows: list[Row]) -> str:
    lines = [f"{'lambda':>7}  {'bias exact':>11}  {'bias scaled':>11}  {'var exact':>10}  {'var scaled':>10}"]
    shown = lambda value, zero: f"{'0 (exact)':>11}" if zero else f"{value:11.3e}"  # rational arithmetic said 0
    for r in rows:
        lines.append(f"{r.lam:7.2f}  {shown(r.exact_bias, r.exact_bias_is_zero)}  {shown(r.scaled_bias, r.scaled_bias_is_zero)}  "
                     f"{r.exact_variance:10.3e}  {r.scaled_variance:10.3e}")
    return "\n".join(lines)


def write_figures(out_dir) -> tuple[list[Path], list[tuple[str, bool, str]], list[Row]]:
    """Write both figures into ``out_dir``; returns ``(paths, claims, table rows)``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = bias_variance_table()
    paths = [write_clip_figure(out / "ppo_clip_objective.png"), write_bias_variance_figure(out / "gae_bias_variance.png", rows)]
    return paths, claims(rows) + clip_claims(np.linspace(0.0, 2.0, 401)[1:]), rows

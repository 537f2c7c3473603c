"""Checks for the natural-gradient / TRPO chapter (``spec/clauses/50_trpo.toml``).

Every check starts from fixed known-answer inputs (the same on every seed), then searches drawn
ones. Expected numbers come from formulas evaluated by the suite in float64 (a dense solve of
the Fisher system, the Fisher built from autograd Jacobians of log-probabilities, the line-search
rule applied to the suite's own surrogate and KL), never from the reference implementation.

The callables a candidate receives (``matvec``, ``fvp``, ``surrogate``, ``kl``, ``policy``) are built
here: they accept the candidate's array kind (numpy or torch) in any float dtype and answer in the
same kind and dtype, computing in float64 underneath. They record every argument, so a failure can
say which trials a line search evaluated.

Declared conventions (``damping``, ``backtrack_factor``, ``natural_step_cg_tol``,
``line_search_accept_ratio``, ``trpo_advantage_normalization``, ``trpo_policy_families``) are the
contract's (spec/contract/50_trpo.toml), each checked exactly. A line search's strict ``kl < max_kl``
and the default ``kl <= max_kl`` both pass: the checks keep every trial's KL away from max_kl.

Not conventions: a line search that tests KL(new || old) (sb3-contrib) constrains a different
divergence and can accept steps outside the TRPO trust region; a fixed-size natural step
(Tianshou's NPG) ignores the KL budget. Both fail the clause they break.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..kit import edges
from ..kit.assertions import ClauseFailure, assert_close, matches, mismatch_table
from ..kit.registry import check
from ..kit.strategies import real_arrays, rounded
from ..kit.strategies import trust_region as draws
from ..kit.strategies.trust_region import with_spectrum
from ..kit.tolerances import TINY, U64, tiny
from ...spec import contract

# ---------------------------------------------------------------------------------------------
# declared conventions


def damping(ctx) -> float:
    """(F + damping I): the damping the candidate adds to the Fisher (Tianshou, sb3-contrib: 0.1)."""
    return float(ctx.convention("damping"))


def backtrack_factor(ctx) -> float:
    """beta of the line search's x0 + beta^k fullstep."""
    return float(ctx.convention("backtrack_factor"))


def cg_stop(ctx) -> float:
    """``natural_step_cg_tol``: the r'r below which the candidate's CG inside natural_step / trpo_update stops
    (libraries: 1e-10); the step is then only as accurate as |r| <= sqrt(tol) allows."""
    return float(ctx.convention("natural_step_cg_tol"))


def accept_ratio(ctx) -> float:
    """r of the sufficient-increase test: trial k must gain more than r beta^k g'fullstep (0: plain improvement)."""
    return float(ctx.convention("line_search_accept_ratio"))


def standardises(ctx) -> bool:
    """Whether trpo_update standardises the advantages over the batch before its step."""
    return ctx.convention("trpo_advantage_normalization") == "batch"


def families(ctx) -> tuple[str, ...]:
    """The policy families the candidate's fisher_vector_product / trpo_update accept (NotProvided if none
    the clause needs)."""
    return ctx.provided("trpo_policy_families")


def standardised(advantages: np.ndarray) -> np.ndarray:
    """(A - mean) / std (ddof 1, as Tensor.std in every library that declares it): the scale cancels in the
    natural step (normalised to max_kl) and in both line-search tests, so only the centring matters.
    Constant advantages give 0 (the rule of PPO-ADVANTAGE-NORMALISATION-DEGENERATE)."""
    centred = advantages - advantages.mean()
    std = centred.std(ddof=1) if len(centred) > 1 else 0.0
    return centred / std if std > 0 else np.zeros_like(centred)


def declared(ctx) -> str:
    """The conventions in force, for messages."""
    text = f"damping {damping(ctx):g}, backtrack factor {backtrack_factor(ctx):g}"
    if accept_ratio(ctx):
        text += f", accept ratio {accept_ratio(ctx):g}"
    return text


# ---------------------------------------------------------------------------------------------
# the callables handed to the candidate


def as_float64(value) -> np.ndarray:
    if hasattr(value, "detach"):  # torch
        value = value.detach().cpu().numpy()
    return np.array(value, dtype=np.float64)


def like(value, template):
    """``value`` (float64) in the array kind and float dtype of ``template`` (numpy scalar for a scalar)."""
    if hasattr(template, "detach"):
        import torch

        return torch.as_tensor(np.asarray(value, dtype=np.float64), dtype=template.dtype, device=template.device)
    dtype = getattr(template, "dtype", np.float64)
    dtype = dtype if np.issubdtype(dtype, np.floating) else np.float64
    out = np.asarray(value, dtype=dtype)
    return out if out.ndim else out[()]


class SuiteFunction:
    """A function of one vector that the suite hands the candidate; records what it was called with."""

    def __init__(self, function, text: str):
        self.function, self.text, self.calls = function, text, []

    def __repr__(self) -> str:
        return self.text

    def __call__(self, x):
        values = as_float64(x)
        self.calls.append(values.copy())
        return like(self.function(values), x)


def array_text(a: np.ndarray) -> str:
    return f"np.array({np.asarray(a).tolist()!r})" if np.asarray(a).size <= 64 else f"<array shape={np.shape(a)}>"


def matvec(A: np.ndarray, name: str = "A") -> SuiteFunction:
    n = A.shape[0]
    return SuiteFunction(lambda v: (A @ v.reshape(n, -1)).reshape(v.shape), f"lambda v: {name} @ v  # {name} = {array_text(A)}")


# ---------------------------------------------------------------------------------------------
# SPD systems


def condition(A: np.ndarray) -> tuple[float, float, float]:
    """(lambda_min, lambda_max, kappa) of a symmetric positive definite matrix."""
    eigenvalues = np.linalg.eigvalsh(A)
    return float(eigenvalues[0]), float(eigenvalues[-1]), float(eigenvalues[-1] / eigenvalues[0])


# ---------------------------------------------------------------------------------------------
# tolerances
#
# CG. In exact arithmetic CG solves an n x n SPD system in n steps. In floating point (Greenbaum 1989;
# Greenbaum, "Iterative methods for solving linear systems", 1997, §7.3) the computed iterate x_k
# reaches the attainable accuracy ||b - A x_k|| <= c k u (||A|| max_j ||x_j|| + ||b||), and from x_0 = 0
# the iterates' norms grow monotonically (Hestenes & Stiefel 1952, Thm 6:3), so max_j ||x_j|| = ||x_k||.
# Lost orthogonality delays convergence: on condition numbers up to 1e6 the n-th iterate can still be
# far off (relative residual above 1e2 was measured at n = 4), so the clause gives k = 3n steps; on
# 40000 drawn systems (n <= 10, every spectrum shape of ``spd_matrices`` and clustered ones) the
# worst backward error after 3n steps was 0.21 k u. The bound takes c = 2.
CG_STEPS_PER_DIM = 3
CG_TOL = 1e-300  # the candidate's stopping threshold on r'r: only a residual that is exactly 0 stops it early


def cg_residual_bound(A, x, b, iters: int, u: float) -> float:
    return 2.0 * iters * u * (np.linalg.norm(A, 2) * np.linalg.norm(x) + np.linalg.norm(b))


# Natural step. Write P = F + damping I (lambda_min, lambda_max, kappa = cond(P)), x* = P^-1 g, and let
# the candidate return Delta = beta x with x its CG solution after k = 3n steps. From the CG bound,
# the true residual r = g - P x has ||r|| <= 2 k u (||P|| ||x|| + ||g||) <= 4 k u kappa ||g|| (as
# ||P|| ||x|| <= kappa ||g|| up to the same small error); a candidate whose CG stops once r'r < tol
# (the declared natural_step_cg_tol) adds sqrt(tol). Call rho = ||r|| / ||g|| <= 4 k u kappa + sqrt(tol)/||g||.
# In the P-norm
#   ||x - x*||_P = ||r||_{P^-1} <= ||r|| / sqrt(lambda_min),  ||x*||_P >= ||g|| / sqrt(lambda_max),
# so the direction error (sine of the P-angle) is at most  eps_dir = sqrt(kappa) rho.
# Budget: q = 1/2 Delta'P Delta. If beta is normalised with x'P x (the fvp of x), q = max_kl up to the
# roundings of the normaliser, (2n + 8) u sqrt(n) kappa (|x|'|P||x| <= sqrt(n) ||P|| ||x||^2 <= sqrt(n)
# kappa x'P x); if it is normalised with g'x, q = max_kl (1 - x'r / g'x) and |x'r| / g'x <= ||x|| ||r|| /
# (x'P x - |x'r|) <= 2 kappa rho (first order, doubled). The bound on |q / max_kl - 1| is the sum:
#   eps_kl = 2 kappa rho + (2n + 8) u sqrt(n) kappa.
# The suite evaluates q in float64: add (2n + 4) u64 sqrt(n) kappa. Inputs rounded to float32 are
# rounded before the suite computes x*, so they need no term.


def natural_step_errors(P, u: float, g_norm: float = 1.0, stop: float = 0.0) -> tuple[float, float]:
    """(eps_dir, eps_kl) for the system P and a gradient of norm ``g_norm`` (see the derivation above)."""
    n = P.shape[0]
    _, _, kappa = condition(P)
    k = CG_STEPS_PER_DIM * n
    rho = 4.0 * k * u * kappa + math.sqrt(stop) / max(g_norm, 1e-300)
    eps_dir = math.sqrt(kappa) * rho
    eps_kl = 2.0 * kappa * rho + (2 * n + 8) * u * math.sqrt(n) * kappa + (2 * n + 4) * U64 * math.sqrt(n) * kappa
    return eps_dir, eps_kl


# ---------------------------------------------------------------------------------------------
# conjugate gradient

def known_system(answer_id: str):
    """A conjugate_gradient known answer's (A, b) (spec/contract/50_trpo.toml: matvec holds A)."""
    x = contract.known_answer(answer_id).arrays()
    return np.asarray(x["matvec"], dtype=np.float64), x["b"]


CG_KNOWN = [
    # x = (1/11, 7/11); kappa = 1.94. Steepest descent (no conjugation) is still 1e-3 off after 6 steps.
    known_system("trpo.cg-2x2"),
    # kappa = 1e6 in a rotated basis: the clause's worst conditioning.
    (with_spectrum([1.0, 1e6]), np.array([1.0, 1.0])),
    # five eigenvalues over six decades, rotated; b not aligned with any eigenvector.
    (with_spectrum([1.0, 10.0, 1e2, 1e4, 1e6]), np.array([1.0, -2.0, 3.0, -4.0, 5.0])),
]


def solve_with_cg(ctx, A, b, iters=None):
    n = len(b)
    iters = iters or CG_STEPS_PER_DIM * n
    call = ctx.call("conjugate_gradient", {"matvec": matvec(A), "b": b, "iters": iters, "tol": CG_TOL},
                    dtype=np.float64, shape=(n,))
    return call.outputs[0], call, iters


@check("TRPO-CG-SOLVES-SPD")
def cg_solves_spd(ctx):
    """CG reaches backward error 2 k u (||A|| ||x|| + ||b||) within k = 3n steps, condition numbers to 1e6, float64."""

    def verify(A, b, iters=None):
        x, call, iters = solve_with_cg(ctx, A, b, iters)
        residual = A @ x - b
        bound = cg_residual_bound(A, x, b, iters, call.unit_roundoff)
        exact = np.linalg.solve(A, b)
        _, _, kappa = condition(A)
        assert_close(
            residual, np.zeros_like(b), bound,
            what=f"A x - b after iters = {iters} (n = {len(b)}, condition number {kappa:.3g}; x[0] = {x[0]:.10g}, exact {exact[0]:.10g})",
            call=call.code,
            cause="CG does not converge: the search directions are not A-conjugate (beta = r_new'r_new / r'r missing or "
                  "computed from a stale r'r), or the residual is updated with the wrong sign",
        )

    for A, b in CG_KNOWN:
        verify(A, b)
    for iters in edges.values("conjugate_gradient", "iters"):  # iters = 1: a one-dimensional system is solved in one step
        verify(np.array([[4.0]]), np.array([2.0]), iters)

    ctx.property(draws.spd_systems(), lambda s: verify(*s), label="drawn", tier="known-answers-first")


# The stopping rule. Judged through the residual r'r = |b - A x|^2 of the returned x: from 0, CG's k-th iterate leaves
# r_k'r_k (the suite runs CG in float64). Only steps whose residuals fall by a factor 16 or more on either side are used,
# and the candidate's r'r must land within a factor 4 of r_k'r_k: one step fewer leaves at least 4x more, one step more at
# least 4x less. A solver may start elsewhere (sb3-contrib: 1e-4 randn per component): a start of norm at most
# 1e-3 sqrt(n) moves every residual by at most ||A|| 1e-3 sqrt(n), so drawn systems are used only where that is below a
# tenth of |r_k| (the factor-4 band holds then); the known system (||A|| = 4.6, |r_1| = 0.56) qualifies.


def cg_iterates(A, b, steps: int) -> tuple[list[np.ndarray], list[float]]:
    """CG's iterates x_k from x = 0 and their r_k'r_k, k = 0 .. steps (float64)."""
    x, r = np.zeros_like(b, dtype=np.float64), np.asarray(b, dtype=np.float64).copy()
    p, rr = r.copy(), float(r @ r)
    xs, out = [x.copy()], [rr]
    for _ in range(steps):
        if rr > 0.0:
            Ap = A @ p
            alpha = rr / float(p @ Ap)
            x, r = x + alpha * p, r - alpha * Ap
            new = float(r @ r)
            p, rr = r + (new / rr) * p, new
        xs.append(x.copy())
        out.append(rr)
    return xs, out


def cg_residuals(A, b, steps: int) -> list[float]:
    """r_k'r_k of CG's iterates from x = 0, k = 0 .. steps (float64)."""
    return cg_iterates(A, b, steps)[1]


def verify_cg_stop(ctx, A, b, iters: int, tol: float, k: int, what: str):
    call = ctx.call("conjugate_gradient", {"matvec": matvec(A), "b": b, "iters": int(iters), "tol": float(tol)}, dtype=np.float64,
                    shape=(len(b),))
    x = call.outputs[0]
    rr = float(np.sum((b - A @ x) ** 2))
    expected = cg_residuals(A, b, k)[k]
    low, high = expected / 4, 4 * expected
    if not low <= rr <= high:
        more = rr < low
        cause = ("it ran past the stopping rule: the tolerance is never tested, or compared with the residual's norm instead of r'r, "
                 "or more than iters steps are taken") if more else \
            "it stopped early: fewer than iters steps, or a residual compared with tol before it fell below it"
        raise ClauseFailure(f"conjugate_gradient {what}: r'r of the result is {rr:.6g}; CG stops after {k} step(s) at r'r = {expected:.6g} "
                            f"(expected within [{low:.4g}, {high:.4g}]: {'less' if more else 'more'} left than {k} step(s) leave)",
                            call=call.code, cause=cause)


@check("TRPO-CG-STOPPING-RULE")
def cg_stopping_rule(ctx):
    """Stops once r'r <= tol or after iters steps, judged by the residual the returned x leaves."""
    A, b = known_system("trpo.cg-2x2")  # r'r: 5 at 0, 0.3125 after one step, 0 after two
    verify_cg_stop(ctx, A, b, 1, CG_TOL, 1, "(iters = 1)")
    verify_cg_stop(ctx, A, b, 10, 0.4, 1, "(tol = 0.4 between r_1'r_1 = 0.3125 and its norm 0.559)")
    for tol in edges.values("conjugate_gradient", "tol"):  # 0: only the iteration count stops it; 1: between 0.3125 and 5
        verify_cg_stop(ctx, A, b, 1 if tol == 0 else 10, tol, 1, f"(edge tol = {tol:g})")

    def drawn(system):
        A, b = system
        n = len(b)
        rr = cg_residuals(A, b, n)
        start = np.linalg.norm(A, 2) * 1e-3 * math.sqrt(n)  # what a start near 0 can move a residual by
        for k in range(1, n):
            if rr[k] > 0 and rr[k] <= rr[k - 1] / 16 and rr[k + 1] <= rr[k] / 16 and start <= 0.1 * math.sqrt(rr[k]):
                verify_cg_stop(ctx, A, b, k, CG_TOL, k, f"(iters = {k})")
                verify_cg_stop(ctx, A, b, 3 * n, 4 * rr[k], k, f"(tol = 4 r_{k}'r_{k})")
                return

    ctx.property(draws.spd_systems(), drawn, label="drawn", tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# Fisher-vector product


class Policy:
    """A small policy handed to the candidate: ``policy(theta)`` -> torch Distribution, batch (B,)."""

    def __init__(self, kind: str, features: np.ndarray, size: int):
        from ...reference import trpo as ref

        self.kind, self.features, self.size = kind, np.asarray(features, dtype=np.float64), size
        build = ref.linear_categorical if kind == "categorical" else ref.linear_diag_gaussian
        self._policy = build(self.features, size)
        self.n_params = self._policy.n_params
        self.batch = self.features.shape[0]
        self.fisher_cache: dict = {}  # theta bytes -> (F, |F|): the strategy and the oracle both need it
        self.jacobian_cache: dict = {}  # theta bytes -> (B, K, P) log-probability Jacobian (categorical)

    def __call__(self, theta):
        return self._policy(theta)

    def rounded(self, dtype) -> "Policy":
        """The same policy with features representable in ``dtype`` (the candidate casts them to it)."""
        features = rounded(self.features, dtype)
        return self if np.array_equal(features, self.features) else Policy(self.kind, features, self.size)

    def __repr__(self) -> str:
        build = "linear_categorical" if self.kind == "categorical" else "linear_diag_gaussian"
        return f"rlspec.reference.trpo.{build}({array_text(self.features)}, {self.size})"


def exact_fisher(policy: Policy, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(F, |F|): the Fisher matrix mean_b E_a[grad log pi grad log pi'] from autograd Jacobians, and the
    same sum over absolute values (the magnitude rounding errors scale with)."""
    import torch
    from torch.autograd.functional import jacobian

    key = np.asarray(theta, dtype=np.float64).tobytes()
    if key in policy.fisher_cache:
        return policy.fisher_cache[key]
    t = torch.tensor(theta, dtype=torch.float64)
    B = policy.batch
    if policy.kind == "categorical":
        J = jacobian(lambda w: policy(w).logits, t)  # (B, K, P): Jacobians of the log-probabilities
        policy.jacobian_cache[key] = J.numpy()
        p = policy(t).probs.detach()  # (B, K)
        F = torch.einsum("bk,bkp,bkq->pq", p, J, J) / B
        Jz = (J - J[:, -1:, :]).abs()  # Jacobians of the raw logits (the last one is pinned at 0)
        mean_abs = torch.einsum("bk,bkp->bp", p, Jz)
        magnitude = (torch.einsum("bk,bkp,bkq->pq", p, Jz, Jz) + torch.einsum("bp,bq->pq", mean_abs, mean_abs)) / B
    else:
        Jm = jacobian(lambda w: policy(w).base_dist.loc, t)  # (B, D, P)
        Js = jacobian(lambda w: policy(w).base_dist.scale.log(), t)  # (B, D, P)
        precision = policy(t).base_dist.scale.detach() ** -2  # (B, D)
        F = (torch.einsum("bd,bdp,bdq->pq", precision, Jm, Jm) + 2 * torch.einsum("bdp,bdq->pq", Js, Js)) / B
        magnitude = (torch.einsum("bd,bdp,bdq->pq", precision, Jm.abs(), Jm.abs())
                     + 2 * torch.einsum("bdp,bdq->pq", Js.abs(), Js.abs())) / B
    policy.fisher_cache[key] = F.numpy(), magnitude.numpy()
    return policy.fisher_cache[key]


# Tolerance. The candidate differentiates the mean KL twice; for a policy linear in theta the Hessian
# is J'(diag p - p p')J (Gaussian: J_mu' diag(1/sigma^2) J_mu + 2 J_s'J_s), evaluated through chains of
# at most P (J v) + 2K (the two contractions over actions) + B (the batch mean) + 16 (softmax/exp/log,
# the two backward passes, the damping term) roundings on terms bounded by |J|'(diag p + p p')|J||v|;
# rounding float64 features to the candidate's dtype adds 4 u on the same terms. The suite's oracle is
# as accurate again: factor 2.


def fvp_tolerance(policy: Policy, magnitude, v, damp: float, u: float) -> np.ndarray:
    K = policy.size + 1
    c = policy.n_params + 2 * K + policy.batch + 20
    return 2.0 * c * u * (magnitude @ np.abs(v)) + 2.0 * u * damp * np.abs(v) + 2.0 * c * tiny(u)  # each rounding may lose eta


FVP_KNOWN = [
    # three states, two features, three actions: P = 4
    (Policy("categorical", [[1.0, 0.5], [-0.5, 1.0], [0.25, -1.0]], 3), np.array([0.3, -0.2, 0.5, 0.1]),
     np.array([1.0, -1.0, 0.5, 2.0])),
    # two states, two features, two action dimensions: P = 6 (four mean weights, two log-stds)
    (Policy("gaussian", [[1.0, -0.5], [0.5, 2.0]], 2), np.array([0.2, -0.1, 0.4, 0.3, -0.5, 0.25]),
     np.array([1.0, 0.5, -1.0, 2.0, 1.0, -0.5])),
]


@check("TRPO-FVP-EQUALS-FISHER")
def fvp_equals_fisher(ctx):
    """fisher_vector_product(policy, params, v) = (F + damping I) v, F from autograd Jacobians of log pi."""
    damp = damping(ctx)

    def verify(policy, theta, v):
        policy = policy.rounded(ctx.dtype)
        theta, v = rounded(theta, ctx.dtype), rounded(v, ctx.dtype)
        call = ctx.call("fisher_vector_product", {"policy": policy, "params": theta, "v": v}, array="torch",
                        shape=(policy.n_params,))
        F, magnitude = exact_fisher(policy, theta)
        expected = F @ v + damp * v
        tol = fvp_tolerance(policy, magnitude, v, damp, call.unit_roundoff)
        out = call.outputs[0]

        def diagnose(actual):
            if matches(actual, damp * v, tol):
                return ("the product is damping * v alone: the KL was built as KL(pi_theta || pi_theta) with neither side "
                        "detached, which is identically 0, so its Hessian is 0 (bug E4)")
            if policy.batch > 1 and matches(actual, policy.batch * F @ v + damp * v, policy.batch * tol):
                return f"the product is {policy.batch} x F v: the KL is summed over the batch instead of averaged"
            if damp == 0 and np.any(v) and matches(actual - F @ v, (actual - F @ v)[np.argmax(np.abs(v))] / v[np.argmax(np.abs(v))] * v, tol):
                extra = (actual - F @ v)[np.argmax(np.abs(v))] / v[np.argmax(np.abs(v))]
                return f"the product is (F + {extra:.3g} I) v: undeclared damping (declare RLSPEC_CONVENTIONS['damping'] = {extra:.3g})"
            return ""

        assert_close(out, expected, tol, what=f"fisher_vector_product vs (F + {damp:g} I) v, F = mean_b E_a[score score']",
                     call=call.code, diagnose=diagnose)

    kinds = families(ctx)
    for policy, theta, v in FVP_KNOWN:
        if policy.kind in kinds:
            verify(policy, theta, v)

    ctx.property(draws.policy_points(families=kinds), lambda c: verify(Policy(*c[:3]), *c[3:]), label="drawn",
                 tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# natural step


def run_natural_step(ctx, F, g, max_kl, cg_iters=None):
    n = len(g)
    g = rounded(g, ctx.dtype)
    fvp = matvec(F, "F")
    call = ctx.call("natural_step", {"grad": g, "fvp": fvp, "max_kl": max_kl, "cg_iters": cg_iters or CG_STEPS_PER_DIM * n},
                    shape=(n,))
    return call.outputs[0], g, call


# E4's smallest input: F = diag(1, 100), g = (1, 1), max_kl = 0.01. The natural step
# is (0.1407, 0.0014); a plain-gradient step scaled to the budget is (0.0199, 0.0199) (undamped).
def known_step(answer_id: str):
    """A natural_step known answer's (F, g, max_kl) (fvp holds F)."""
    x = contract.known_answer(answer_id).arrays()
    return np.asarray(x["fvp"], dtype=np.float64), x["grad"], x["max_kl"]


STEP_KNOWN = [
    known_step("trpo.natural-step-e4"),
    (with_spectrum([0.5, 3.0, 40.0]), np.array([1.0, -0.5, 2.0]), 0.05),
    (np.array([[2.0, 0.9], [0.9, 1.0]]), np.array([-1.0, 0.25]), 1.0),
]


def step_edges():
    """(F, g, max_kl, cg_iters) at the contract's edges: max_kl just above 0 and at 1 on bug E4's problem, and cg_iters = 1
    on a one-parameter problem, which CG solves in one step (rlspec.checks.kit.edges)."""
    F, g, max_kl = STEP_KNOWN[0]
    found = [(F, g, kl, None) for kl in edges.values("natural_step", "max_kl")]
    return found + [(np.array([[4.0]]), np.array([2.0]), max_kl, k) for k in edges.values("natural_step", "cg_iters")]


def damped(F, damp):
    return F + damp * np.eye(F.shape[0])


@check("TRPO-NATURAL-STEP-DIRECTION")
def natural_step_direction(ctx):
    """The step is a positive multiple of (F + damping I)^-1 g (the P-angle to it within the CG bound)."""
    damp = damping(ctx)

    def verify(F, g, max_kl, cg_iters=None):
        step, g, call = run_natural_step(ctx, F, g, max_kl, cg_iters)
        P = damped(F, damp)
        x = np.linalg.solve(P, g)
        lam_min, _, _ = condition(P)
        eps_dir, _ = natural_step_errors(P, call.unit_roundoff, np.linalg.norm(g), cg_stop(ctx))
        along = (step @ P @ x) / (x @ P @ x)
        parallel = along * x
        size = math.sqrt(max(step @ P @ step, 0.0))
        tol = eps_dir * size / math.sqrt(lam_min) + TINY
        if step @ g <= 0:
            raise ClauseFailure(
                f"natural_step: the step does not ascend the surrogate (g'step = {step @ g:.6g} <= 0); expected a positive "
                f"multiple of (F + {damp:g} I)^-1 g, e.g. {np.round(math.sqrt(2 * max_kl / (g @ x)) * x, 10).tolist()}",
                table=mismatch_table("index", [(i, e, a, abs(e - a), 0.0) for i, (e, a) in
                                               enumerate(zip(math.sqrt(2 * max_kl / (g @ x)) * x, step))]),
                call=call.code,
                cause="the step is -F^-1 g: the sign of the gradient is flipped (the loss's gradient used where the "
                      "surrogate's was meant, or the step subtracted)",
            )

        def diagnose(actual):
            if np.allclose(actual / np.linalg.norm(actual), g / np.linalg.norm(g), atol=1e-6):
                return "the step is parallel to g: a plain gradient step (the Fisher matrix is not used, or F v returned v)"
            diag_dir = g / np.diag(P)
            if np.allclose(actual / np.linalg.norm(actual), diag_dir / np.linalg.norm(diag_dir), atol=1e-6):
                return "the step is diag(F)^-1 g: a diagonal approximation of the Fisher matrix"
            return ""

        assert_close(step, parallel, tol,
                     what=f"natural_step vs its projection on (F + {damp:g} I)^-1 g (the natural direction)", call=call.code,
                     cause="the step is not along F^-1 g: CG stopped early or solved another system",
                     diagnose=diagnose)

    for F, g, max_kl in STEP_KNOWN:
        verify(F, g, max_kl)
    for case in step_edges():
        verify(*case)
    ctx.property(draws.step_problems(), lambda p: verify(*p), label="drawn", tier="known-answers-first")


@check("TRPO-NATURAL-STEP-KL-BUDGET")
def natural_step_kl_budget(ctx):
    """1/2 step'(F + damping I) step = max_kl, to the relative bound eps_kl (damping as declared, default 0)."""
    damp = damping(ctx)

    def verify(F, g, max_kl, cg_iters=None):
        step, g, call = run_natural_step(ctx, F, g, max_kl, cg_iters)
        P = damped(F, damp)
        q = 0.5 * step @ P @ step
        _, eps_kl = natural_step_errors(P, call.unit_roundoff, np.linalg.norm(g), cg_stop(ctx))
        tol = eps_kl * max_kl

        def diagnose(actual):
            ratio = float(np.ravel(actual)[0]) / max_kl
            undamped = 0.5 * step @ F @ step
            if matches(ratio, 0.5, 4 * eps_kl):
                return "1/2 step'F step = max_kl / 2: the step is sqrt(max_kl / g'F^-1 g) F^-1 g, the factor 2 of the quadratic model missing"
            if step @ step > 0:
                implied = (2 * max_kl - 2 * undamped) / (step @ step)
                if implied > 0 and abs(implied - damp) > 1e-6 and matches(0.5 * step @ damped(F, implied) @ step, max_kl, tol):
                    return (f"the step meets the budget of F + {implied:.4g} I: the step normalisation uses a damped Fisher "
                            f"matrix; declare RLSPEC_CONVENTIONS['damping'] = {implied:.4g} if that is the design")
            return (f"1/2 step'F step = {ratio:.4g} x max_kl: the step size is not set by the KL budget (a fixed step "
                    f"size, as in Tianshou's NPG, or a step normalised by |g|)")

        assert_close(np.array([q]), np.array([max_kl]), np.array([tol]),
                     what=f"1/2 step'(F + {damp:g} I) step vs max_kl = {max_kl:g}", call=call.code, diagnose=diagnose)

    for F, g, max_kl in STEP_KNOWN:
        verify(F, g, max_kl)
    for case in step_edges():
        verify(*case)
    ctx.property(draws.step_problems(), lambda p: verify(*p), label="drawn", tier="known-answers-first")


# Invariance. theta = M phi maps the problem (g, F) to (M'g, M'F M). The exact steps satisfy
# M Delta*_phi = Delta*_theta (proof trpo.natural_direction_invariance), and ||M e||_F = ||e||_{M'F M},
# so each computed step's error, measured in its own P-norm, carries over unchanged: with
# eps = eps_dir + eps_kl (direction and length; |Delta*|_P = sqrt(2 max_kl)) per system,
#   ||M Delta_phi - Delta_theta||_2 <= (eps_theta + eps_phi) sqrt(2 max_kl) / sqrt(lambda_min(P_theta)).
# The suite forms M'F M in float64: a relative perturbation 2n u64 kappa(M)^2, which moves the phi step
# by kappa_phi times that; rounding M'g to the run's dtype moves it by sqrt(kappa_phi) u (twice, for
# safety): both are added to eps_phi. A declared damping is not transformed by M, so a damped
# candidate is checked with orthogonal M only (the proof's caveat).

INVARIANCE_KNOWN = [
    (np.diag([1.0, 100.0]), np.array([1.0, 1.0]), 0.01, np.array([[2.0, 1.0], [0.0, 1.0]])),
    (with_spectrum([0.5, 3.0, 40.0]), np.array([1.0, -0.5, 2.0]), 0.05,
     np.array([[1.0, 0.5, 0.0], [0.0, 2.0, -0.5], [0.25, 0.0, 1.0]])),
]


@check("TRPO-NATURAL-STEP-INVARIANCE")
def natural_step_invariance(ctx):
    """natural_step in coordinates phi (theta = M phi: grad M'g, Fisher M'F M), mapped back by M, equals the theta step."""
    damp = damping(ctx)

    def verify(F, g, max_kl, M, cg_iters=None):
        if damp > 0:  # declared damping: only orthogonal reparameterisations leave F + damping I covariant
            M, _ = np.linalg.qr(M)
        g = rounded(g, ctx.dtype)
        step_theta, g, call_theta = run_natural_step(ctx, F, g, max_kl, cg_iters)
        F_phi = M.T @ F @ M
        F_phi = (F_phi + F_phi.T) / 2
        g_phi = rounded(M.T @ g, ctx.dtype)
        step_phi, g_phi, call_phi = run_natural_step(ctx, F_phi, g_phi, max_kl, cg_iters)
        P_theta, P_phi = damped(F, damp), damped(F_phi, damp)
        lam_min, _, _ = condition(P_theta)
        _, _, kappa_phi = condition(P_phi)
        e_dir_t, e_kl_t = natural_step_errors(P_theta, call_theta.unit_roundoff, np.linalg.norm(g), cg_stop(ctx))
        e_dir_p, e_kl_p = natural_step_errors(P_phi, call_phi.unit_roundoff, np.linalg.norm(g_phi), cg_stop(ctx))
        u = max(call_theta.unit_roundoff, call_phi.unit_roundoff)
        rounding_phi = kappa_phi * 2 * len(g) * U64 * float(np.linalg.cond(M)) ** 2 + 2 * u * math.sqrt(kappa_phi)
        eps = e_dir_t + e_kl_t + e_dir_p + e_kl_p + rounding_phi
        tol = eps * math.sqrt(2 * max_kl) / math.sqrt(lam_min) + TINY

        def diagnose(actual):
            if np.allclose(step_theta / np.linalg.norm(step_theta), g / np.linalg.norm(g), atol=1e-6):
                return "both steps follow the plain gradient (g, then M'g): not invariant, M M'g != g unless M is orthogonal"
            return "the step depends on the coordinates: it is not the Fisher-preconditioned F^-1 g"

        assert_close(M @ step_phi, step_theta, tol,
                     what="M step_phi (natural_step on M'g, M'F M, mapped back) vs step_theta (natural_step on g, F)",
                     call=f"{call_theta.code}\n{call_phi.code}\n# M = {array_text(M)}", diagnose=diagnose)

    for F, g, max_kl, M in INVARIANCE_KNOWN:
        verify(F, g, max_kl, M)
    for F, g, max_kl, cg_iters in step_edges():
        verify(F, g, max_kl, np.eye(len(g)) * 2.0 if cg_iters else INVARIANCE_KNOWN[0][3], cg_iters)

    ctx.property(draws.reparameterised_problems(), lambda p: verify(*p), label="drawn", tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# line search
#
# The suite's surrogate and KL are functions of how far x has moved along fullstep,
# t(x) = (x - x0)'f / f'f: surrogate(x) = S0 + a t + b t^2 and kl(x) = c t^2 + d t^3 (c, d >= 0, so the
# KL grows along the step, as a KL from x0 does). The expected answer is the rule applied to
# t_k = backtrack_factor^k. The surrogate's slope along fullstep at x0 is a (g'fullstep): a declared
# accept ratio r > 0 also requires a t + b t^2 > r a t, and then a > 0 (TRPO's fullstep, a positive
# multiple of F^-1 g, is always an ascent direction; the ratio test means nothing otherwise).
# A trial whose decision rounding could flip is avoided: a decision is robust if the surrogate's gain
# and the KL's distance to max_kl both exceed what moving t by the rounding of x0 + t_k f (dt <= (2k + 4) u (|x0| + |f|) / |f|) and rounding the returned values to the
# candidate's precision (2 u |value|) can change.


class Scenario:
    def __init__(self, x0, fullstep, a, b, c, d, max_kl, max_backtracks, offset=0.3):
        self.x0, self.f = np.asarray(x0, dtype=np.float64), np.asarray(fullstep, dtype=np.float64)
        self.a, self.b, self.c, self.d, self.offset = float(a), float(b), float(c), float(d), float(offset)
        self.max_kl, self.max_backtracks = float(max_kl), int(max_backtracks)

    def rounded(self, dtype) -> "Scenario":
        cast = lambda v: rounded(v, dtype)
        return Scenario(cast(self.x0), cast(self.f), self.a, self.b, self.c, self.d, self.max_kl, self.max_backtracks, self.offset)

    def t(self, x) -> float:
        return float((x - self.x0) @ self.f / (self.f @ self.f))

    def S(self, t):
        return self.offset + self.a * t + self.b * t * t

    def K(self, t):
        return self.c * t * t + self.d * t**3

    def functions(self):
        fx = lambda name: f"{name}(x) with t = (x - x0)'fullstep / fullstep'fullstep"
        surrogate = SuiteFunction(lambda x: self.S(self.t(x)), f"<surrogate: {self.offset:g} + {self.a:g} t + {self.b:g} t^2, {fx('surrogate')}>")
        kl = SuiteFunction(lambda x: self.K(self.t(x)), f"<kl: {self.c:g} t^2 + {self.d:g} t^3, {fx('kl')}>")
        return surrogate, kl

    def trials(self, beta: float, u: float, ratio: float = 0.0):
        """[(k, t, gain, kl, accepted, robust)] for k = 0..max_backtracks-1 (stopping at the first accepted);
        ``ratio``: the declared accept ratio (the gain must also exceed ratio a t)."""
        rows = []
        scale = (np.linalg.norm(self.x0) + np.linalg.norm(self.f)) / np.linalg.norm(self.f)
        for k in range(self.max_backtracks):
            t = beta**k
            dt = (2 * k + 4) * u * scale
            gain, kl = self.S(t) - self.S(0.0), self.K(t)
            excess = gain - ratio * self.a * t  # what the sufficient-increase test compares with 0
            slope_S = abs(self.a) * (1 + ratio) + 2 * abs(self.b) * (t + dt)
            slope_K = 2 * self.c * (t + dt) + 3 * self.d * (t + dt) ** 2
            rounding = 2 * u * (abs(self.S(t)) + abs(self.offset) + ratio * abs(self.a) * t)
            robust = (abs(gain) > 2 * (slope_S * dt + rounding) and abs(excess) > 2 * (slope_S * dt + rounding) and
                      abs(kl - self.max_kl) > 2 * (slope_K * dt + 2 * u * (kl + self.max_kl)))
            accepted = gain > 0 and excess > 0 and kl <= self.max_kl
            rows.append((k, t, gain, kl, accepted, robust))
            if accepted:
                break
        return rows

    def expected(self, beta: float, u: float, ratio: float = 0.0):
        """(t of the returned point or None for x0, whether every decision up to it is robust)."""
        rows = self.trials(beta, u, ratio)
        robust = all(r[5] for r in rows)
        accepted = [r for r in rows if r[4]]
        return (accepted[0][1] if accepted else None), robust

    def describe(self, beta: float, u: float, ratio: float = 0.0) -> str:
        lines = ["  k   t = beta^k      surrogate gain         kl   verdict"]
        for k, t, gain, kl, accepted, _ in self.trials(beta, u, ratio):
            why = "accept" if accepted else ("no improvement" if gain <= 0 else f"kl > max_kl = {self.max_kl:g}"
                                             if kl > self.max_kl else f"gain <= {ratio:g} x predicted {self.a * t:.6g}")
            lines.append(f"{k:>3}  {t:>10.6g}  {gain:>18.6g}  {kl:>9.6g}   {why}")
        return "\n".join(lines)


def run_line_search(ctx, scenario: Scenario):
    scenario = scenario.rounded(ctx.dtype)
    surrogate, kl = scenario.functions()
    n = len(scenario.x0)
    args = {"surrogate": surrogate, "kl": kl, "x0": scenario.x0, "fullstep": scenario.f, "max_kl": scenario.max_kl,
            "max_backtracks": scenario.max_backtracks}
    if accept_ratio(ctx):  # only a candidate that declares the sufficient-increase test receives the slope
        args["expected_improve_rate"] = scenario.a
    call = ctx.call("line_search", args, shape=(n,))
    return call.outputs[0], scenario, call, (surrogate, kl)


def trial_text(scenario: Scenario, beta: float, x, recorded) -> str:
    t = scenario.t(x)
    tried = sorted({round(scenario.t(v), 12) for f in recorded for v in f.calls}, reverse=True)
    k = abs(math.log(t) / math.log(beta)) if t > 0 else float("nan")
    where = f"x0 + {t:.10g} fullstep" + (f" (k = {k:.3g} for beta = {beta:g})" if t > 0 else "")
    evaluated = ", ".join(f"{v:g}" for v in tried[:12]) if tried else "(none: neither was called)"
    return f"returned {where}; the candidate evaluated surrogate/kl at t = {evaluated}"


def verify_line_search(ctx, scenario: Scenario, *, only_failures: bool = False):
    beta, ratio = backtrack_factor(ctx), accept_ratio(ctx)
    x, scenario, call, recorded = run_line_search(ctx, scenario)
    u = call.unit_roundoff
    t_expected, robust = scenario.expected(beta, u, ratio)
    if not robust:
        return False
    if only_failures and t_expected is not None:
        return False
    t_exp = 0.0 if t_expected is None else t_expected
    k = 0 if t_expected is None else round(math.log(t_expected) / math.log(beta))
    expected = scenario.x0 + t_exp * scenario.f
    tol = (2 * k + 4) * u * (np.abs(scenario.x0) + t_exp * np.abs(scenario.f)) + (2 * k + 4) * tiny(u)  # and eta each below the normals
    if t_expected is None:  # x0 may be restored by undoing the last trial, x0 + t f - t f (t <= 1): two
        tol = tol + 4 * u * np.abs(scenario.f)  # more roundings of at most u (|x0| + |f|) each

    def diagnose(actual):
        t = scenario.t(actual)
        at = lambda s: s is not None and abs(t - s) <= 1e-9 * max(1.0, s)  # noqa: E731
        trials = [beta**k for k in range(scenario.max_backtracks)]
        improves, within = scenario.S(t) > scenario.S(0.0), scenario.K(t) <= scenario.max_kl
        # Each rule a broken line search follows, and whether it returns this t; a cause only when one alone does (with one
        # trial, the full step is also the last one: no restore (E1) and no line search (E2) return the same point).
        rules = []
        if t_expected is None and at(trials[-1]):
            rules.append("no trial qualified, yet the last rejected trial was returned instead of x0: the old parameters "
                         "are not restored when the line search fails (bug E1)")
        if at(1.0) and not (improves and within):
            rules.append("the full step was returned although it fails the test: there is no working line search (bug E2)")
        if not within and at(next((s for s in trials if scenario.S(s) > scenario.S(0.0)), None)):
            rules.append(f"the returned trial has kl = {scenario.K(t):.6g} > max_kl = {scenario.max_kl:g}: the first trial that "
                         "improves the surrogate is accepted without checking the KL constraint (bug E3)")
        if not improves and at(next((s for s in trials if scenario.K(s) <= scenario.max_kl), None)):
            rules.append("the returned trial does not improve the surrogate: the first trial within the KL budget is accepted, "
                         "only the KL is tested")
        if t > 0 and (rules or not (improves and within)):
            return rules  # several are listed, none claimed
        if ratio and t > 0 and scenario.S(t) - scenario.S(0.0) <= ratio * scenario.a * t:
            k_got = math.log(t) / math.log(beta)
            if k_got >= 2 and abs(k_got - round(k_got)) < 1e-9:
                return (f"the returned trial gains less than {ratio:g} x its predicted gain: the prediction is scaled by "
                        "the product of every step fraction so far instead of the last one (skrl's expected_improvement *= alpha "
                        "compounds across backtracks)")
            return f"the returned trial gains less than {ratio:g} x its predicted gain: the accept-ratio test is wrong or missing"
        for other in (0.8, 0.5, 0.7, 0.9):
            if other != beta and t > 0 and abs(math.log(t) / math.log(other) - round(math.log(t) / math.log(other))) < 1e-9:
                return (f"the trials shrink by {other:g}, not {beta:g}: declare RLSPEC_CONVENTIONS['backtrack_factor'] = {other:g} "
                        "if that is the design")
        return ""

    what = (f"line_search result vs x0 + {t_exp:g} fullstep ({'no trial qualifies: x0' if t_expected is None else f'first k = {k} that qualifies'}; "
            f"{trial_text(scenario, beta, x, recorded)}; trials:\n{scenario.describe(beta, u, ratio)}\n)")
    assert_close(x, expected, tol, what=what, call=call.code, diagnose=diagnose)
    return True


def known_scenario(answer_id: str) -> Scenario:
    """A line_search known answer (spec/contract/50_trpo.toml) as the suite's scenario: the surrogate and kl
    inputs hold its coefficients."""
    x = contract.known_answer(answer_id).inputs
    s, k = x["surrogate"], x["kl"]
    return Scenario(x["x0"], x["fullstep"], s["a"], s["b"], k["c"], k["d"], x["max_kl"], x["max_backtracks"], s["offset"])


# The KL binds, the surrogate binds, both, neither (the full step qualifies).
LINE_SEARCH_KNOWN = [known_scenario(f"trpo.line-search-{name}") for name in ("kl-binds", "surrogate-binds", "both-bind", "full-step")]
# No trial qualifies: bug E1's smallest input (one trial, a budget no step meets), a surrogate that never
# improves, a KL too large at every trial of ten.
LINE_SEARCH_FAILURES = [known_scenario(f"trpo.line-search-{name}") for name in ("e1-restore", "never-improves", "kl-always-too-large")]

# With a declared accept ratio (fullstep an ascent direction, a > 0):
ACCEPT_RATIO_KNOWN = [
    # gain t - 2.5 t^2 against the prediction t: ratios -1.5, -0.25, 0.375, 0.6875 at t = 1 .. 1/8. With r = 0.5 and
    # beta = 0.5 the first to pass is t = 1/8; a prediction compounded over the backtracks (1/2 x 1/4 instead of
    # 1/4 at the third trial) doubles the ratio there and accepts t = 1/4.
    Scenario([0.5, -1.0], [1.0, 0.5], a=1.0, b=-2.5, c=0.001, d=0.0, max_kl=0.01, max_backtracks=10),
]
ACCEPT_RATIO_FAILURES = [
    # The surrogate rises at first (a > 0) but falls at every trial of five: gain t (1 - 40 t) < 0 for t >= 1/16.
    Scenario([1.0, 0.0], [-0.5, 2.0], a=1.0, b=-40.0, c=0.0, d=0.0, max_kl=0.01, max_backtracks=5),
]


def known_scenarios(ctx, *, failures: bool):
    """The known line-search scenarios for the candidate's declarations: with an accept ratio, the ones whose
    fullstep is an ascent direction, plus those the ratio decides."""
    if not accept_ratio(ctx):
        return LINE_SEARCH_FAILURES if failures else LINE_SEARCH_KNOWN + LINE_SEARCH_FAILURES[:1]
    ascent = lambda cases: [c for c in cases if c.a > 0]
    if failures:
        return ascent(LINE_SEARCH_FAILURES) + ACCEPT_RATIO_FAILURES
    return ascent(LINE_SEARCH_KNOWN) + ACCEPT_RATIO_KNOWN + LINE_SEARCH_FAILURES[:1]


@check("TRPO-LINE-SEARCH-RULE")
def line_search_rule(ctx):
    """x0 + beta^k fullstep for the first k with surrogate(x) > surrogate(x0) and kl(x) <= max_kl (beta declared, 0.5)."""
    for scenario in known_scenarios(ctx, failures=False):
        verify_line_search(ctx, scenario)
    base = known_scenarios(ctx, failures=False)[0]
    for max_kl in edges.values("line_search", "max_kl"):  # the KL binds at the full step unless max_kl is 1
        verify_line_search(ctx, Scenario(base.x0, base.f, base.a, base.b, base.c, base.d, max_kl, base.max_backtracks, base.offset))
    drawn = draws.line_searches(ascent=bool(accept_ratio(ctx)), beta=backtrack_factor(ctx))
    ctx.property(drawn, lambda s: assume(verify_line_search(ctx, Scenario(*s))), label="drawn", tier="known-answers-first")


@check("TRPO-LINE-SEARCH-RESTORES-ON-FAILURE")
def line_search_restores(ctx):
    """When no trial improves the surrogate within the KL budget the line search returns x0 itself."""
    for scenario in known_scenarios(ctx, failures=True):
        verify_line_search(ctx, scenario, only_failures=True)
    base = LINE_SEARCH_FAILURES[-1]  # the KL exceeds max_kl at every trial, for max_kl up to 1 as well
    for max_kl in edges.values("line_search", "max_kl"):
        verify_line_search(ctx, Scenario(base.x0, base.f, base.a, base.b, base.c, base.d, max_kl, base.max_backtracks, base.offset),
                           only_failures=True)
    drawn = draws.line_searches(failing=True, ascent=bool(accept_ratio(ctx)), beta=backtrack_factor(ctx))
    ctx.property(drawn, lambda s: assume(verify_line_search(ctx, Scenario(*s), only_failures=True)), label="drawn",
                 tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# the complete update
#
# The suite's oracle for trpo_update: g = grad L(theta0) by autograd in float64, F from the Jacobians
# (exact_fisher), Delta* = sqrt(2 max_kl / g'x) x with x = (F + damping I)^-1 g by a dense solve, and the
# rule applied to the exact surrogate and KL(pi_old || pi_theta) at theta0 + beta^k Delta*.
#
# Tolerance. The candidate's full step differs from Delta* by its CG and budget errors (eps_dir,
# eps_kl/2 in the P-norm, as for natural_step) and by its rounding of g: g is a batch mean of A_b times
# score vectors, computed with at most P + K + B + 10 roundings on terms bounded by
# M_g = mean_b |A_b| |grad log pi(a_b|s_b)| (|ratio| = 1 at theta0), which moves x by at most
# sqrt(kappa) |dg| / |g| relative to |x|_P. Trial k scales that by beta^k, and forming theta0 + beta^k
# Delta adds (2k + 4) u (|theta0| + beta^k |Delta|). A decision at trial j is robust when the
# surrogate's gain and the KL's distance to max_kl exceed twice what that perturbation (through
# |grad|_{P^-1}) and the candidate's rounding of L and the KL (2 (B + K + 8) u times their terms) can
# change; examples with a fragile decision are not drawn (known answers are built with wide margins).


class UpdateProblem:
    def __init__(self, policy: Policy, theta0, actions, advantages, max_kl: float, max_backtracks: int = 10,
                 cg_iters: int | None = None):
        self.policy = policy
        self.theta0 = np.asarray(theta0, dtype=np.float64)
        self.actions = np.asarray(actions, dtype=np.float64)
        self.advantages = np.asarray(advantages, dtype=np.float64)
        self.max_kl, self.max_backtracks = float(max_kl), int(max_backtracks)
        self._cg_iters = cg_iters  # None: enough iterations to solve the natural step exactly

    def rounded(self, dtype) -> "UpdateProblem":
        cast = lambda v: rounded(v, dtype)
        actions = self.actions if self.policy.kind == "categorical" else cast(self.actions)
        return UpdateProblem(self.policy.rounded(dtype), cast(self.theta0), actions, cast(self.advantages), self.max_kl,
                             self.max_backtracks, self._cg_iters)

    @property
    def cg_iters(self) -> int:
        return CG_STEPS_PER_DIM * self.policy.n_params if self._cg_iters is None else self._cg_iters

    def at_edges(self, *names: str):
        """This problem with max_kl, cg_iters and max_backtracks (or ``names``) moved one at a time to the contract's edges."""
        base = {"max_kl": self.max_kl, "cg_iters": self.cg_iters, "max_backtracks": self.max_backtracks}
        for args, _ in edges.cases("trpo_update", base, *names):
            yield UpdateProblem(self.policy, self.theta0, self.actions, self.advantages, args["max_kl"], args["max_backtracks"],
                                args["cg_iters"])


class Oracle:
    """Everything the suite computes about one update problem, in float64. ``ratio``: the declared accept
    ratio; ``standardise``: the candidate standardises the advantages first (the oracle does too)."""

    def __init__(self, problem: UpdateProblem, damp: float, beta: float, u: float, stop: float = 0.0, *, full: bool = True,
                 ratio: float = 0.0, standardise: bool = False):
        import torch
        from torch.distributions import kl_divergence

        self.problem, self.beta, self.u, self.torch, self.ratio = problem, beta, u, torch, ratio
        policy, B = problem.policy, problem.policy.batch
        theta0 = torch.tensor(problem.theta0)
        actions = torch.tensor(problem.actions, dtype=torch.long if policy.kind == "categorical" else torch.float64)
        self.advantages = standardised(problem.advantages) if standardise else problem.advantages
        advantages = torch.tensor(self.advantages)
        old = policy(theta0)
        logp_old = old.log_prob(actions).detach()
        self.surrogate = lambda th: (torch.exp(policy(th).log_prob(actions) - logp_old) * advantages).mean()
        self.kl = lambda th: kl_divergence(old, policy(th)).mean()
        self.reverse_kl = lambda th: kl_divergence(policy(th), old).mean()
        n_actions = policy.size + 1 if policy.kind == "categorical" else 1
        self.c_eval = 2 * (B + n_actions + 8)
        if not full:  # the KL functions are all a constraint check needs
            return
        leaf = theta0.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(self.surrogate(leaf), leaf)
        self.g = g.numpy()
        F, _ = exact_fisher(policy, problem.theta0)
        # |grad log pi(a_b|s_b)|, the magnitude of the gradient's terms: the rows of the log-probability
        # Jacobian at the taken actions (categorical: read off the Jacobian exact_fisher computed).
        if policy.kind == "categorical":
            scores = policy.jacobian_cache[problem.theta0.tobytes()][np.arange(B), problem.actions.astype(np.int64)]
        else:
            from torch.autograd.functional import jacobian

            scores = jacobian(lambda th: policy(th).log_prob(actions), theta0).numpy()  # (B, P)
        M_g = np.abs(self.advantages) @ np.abs(scores) / B
        self.P = damped(F, damp)
        self.lam_min, _, self.kappa = condition(self.P)
        x = np.linalg.solve(self.P, self.g)
        self.step = math.sqrt(2 * problem.max_kl / (self.g @ x)) * x
        self.predicted = float(self.g @ self.step)  # the linear model's gain of the full step, g' Delta* > 0
        self.step_norm = math.sqrt(self.step @ self.P @ self.step)
        eps_dir, eps_kl = natural_step_errors(self.P, u, np.linalg.norm(self.g), stop)
        c_g = policy.n_params + n_actions + B + 10
        eps_g = math.sqrt(self.kappa) * c_g * u * np.linalg.norm(M_g) / max(np.linalg.norm(self.g), 1e-300)
        self.eps = eps_dir + eps_kl / 2 + eps_g

    def at(self, t: float):
        """(gain, kl, reverse kl, margins for gain and kl) at theta0 + t Delta*; with an accept ratio the gain
        is the excess over ratio t g'Delta* (what the sufficient-increase test compares with 0)."""
        torch = self.torch
        theta = torch.tensor(self.problem.theta0 + t * self.step, requires_grad=True)
        gain = self.surrogate(theta) - self.surrogate(torch.tensor(self.problem.theta0))
        kl = self.kl(theta)
        (grad_s,) = torch.autograd.grad(gain, theta, retain_graph=True)
        (grad_k,) = torch.autograd.grad(kl, theta)
        gain, kl = gain.detach(), kl.detach()
        inv = lambda v: math.sqrt(max(v @ np.linalg.solve(self.P, v), 0.0))  # |v|_{P^-1}
        k = round(math.log(t) / math.log(self.beta)) if t < 1 else 0
        lam_max = self.kappa * self.lam_min
        moved = (t * self.eps * self.step_norm  # |trial - exact trial|_P
                 + (2 * k + 4) * self.u * (np.linalg.norm(self.problem.theta0) + t * np.linalg.norm(self.step)) * math.sqrt(lam_max))
        size = float(torch.abs(self.surrogate(theta).detach())) + float(np.mean(np.abs(self.advantages)))
        margin_gain = 2 * (inv(grad_s.numpy()) * moved + self.c_eval * self.u * size)
        if self.ratio:  # the candidate's prediction t g'Delta is off by its step's relative error (eps) and rounding
            gain = gain - self.ratio * t * self.predicted
            margin_gain += 2 * self.ratio * t * abs(self.predicted) * (2 * self.eps + self.c_eval * self.u)
        margin_kl = 2 * (inv(grad_k.numpy()) * moved + self.c_eval * self.u * (float(kl) + self.problem.max_kl + 1.0))
        return float(gain), float(kl), float(self.reverse_kl(theta.detach())), margin_gain, margin_kl

    def trials(self):
        rows = []
        for k in range(self.problem.max_backtracks):
            t = self.beta**k
            gain, kl, reverse, m_gain, m_kl = self.at(t)
            accepted = gain > 0 and kl <= self.problem.max_kl  # gain: the excess over the accept ratio's share
            robust = abs(gain) > m_gain and abs(kl - self.problem.max_kl) > m_kl
            rows.append((k, t, gain, kl, reverse, accepted, robust))
            if accepted:
                break
        return rows

    def expected(self):
        rows = self.trials()
        accepted = [r for r in rows if r[5]]
        t = accepted[0][1] if accepted else None
        return t, all(r[6] for r in rows), rows

    def tolerance(self, t: float, k: int) -> np.ndarray:
        return (t * self.eps * self.step_norm / math.sqrt(self.lam_min)
                + (2 * k + 4) * self.u * (np.abs(self.problem.theta0) + t * np.abs(self.step)) + TINY)


def describe_trials(rows, max_kl, ratio: float = 0.0) -> str:
    header = "surrogate gain" if not ratio else f"gain - {ratio:g} x predicted"
    lines = [f"  k   t = beta^k   {header:>14}   KL(old||new)   KL(new||old)   verdict"]
    for k, t, gain, kl, reverse, accepted, _ in rows:
        short = "no improvement" if not ratio else f"gain <= {ratio:g} x predicted"
        why = "accept" if accepted else (short if gain <= 0 else f"KL(old||new) > max_kl = {max_kl:g}")
        lines.append(f"{k:>3}  {t:>11.6g}  {gain:>15.6g}  {kl:>13.6g}  {reverse:>13.6g}   {why}")
    return "\n".join(lines)


def run_update(ctx, problem: UpdateProblem, *, record: bool = False, **options):
    """Call trpo_update; ``record``: hand it a :class:`RecordedPolicy` and return that too."""
    problem = problem.rounded(ctx.dtype)
    policy = RecordedPolicy(problem.policy) if record else problem.policy
    if problem.policy.kind == "categorical":  # integer actions pass as a torch long tensor (arrays become floats)
        import torch

        actions = torch.tensor(problem.actions.astype(np.int64))
    else:
        actions = problem.actions
    call = ctx.call("trpo_update", {"policy": policy, "params": problem.theta0, "actions": actions,
                                    "advantages": problem.advantages, "max_kl": problem.max_kl,
                                    "cg_iters": problem.cg_iters, "max_backtracks": problem.max_backtracks},
                    array="torch", shape=(problem.policy.n_params,), **options)
    return (call.outputs[0], problem, call, policy) if record else (call.outputs[0], problem, call)


def reverse_rule_trial(oracle: "Oracle"):
    """(t, k) of the trial a line search testing KL(new || old) would accept, or (None, 0)."""
    for k in range(oracle.problem.max_backtracks):
        t = oracle.beta**k
        gain, _, reverse, _, _ = oracle.at(t)
        if gain > 0 and reverse <= oracle.problem.max_kl:
            return t, k
    return None, 0


def compounded_rule_trial(oracle: "Oracle"):
    """(t, k) of the trial a line search accepts whose predicted gain is compounded over the backtracks,
    ratio g'Delta* beta^(0 + 1 + ... + k) instead of ratio g'Delta* beta^k (skrl 2.1.1), or (None, 0)."""
    for k in range(oracle.problem.max_backtracks):
        t = oracle.beta**k
        excess, kl, _, _, _ = oracle.at(t)
        gain = excess + oracle.ratio * t * oracle.predicted
        if gain > oracle.ratio * oracle.predicted * oracle.beta ** (k * (k + 1) / 2) and kl <= oracle.problem.max_kl:
            return t, k
    return None, 0


def verify_constant_advantages(ctx, problem: UpdateProblem) -> None:
    """A candidate that standardises its advantages, on constant ones: they standardise to 0 (the std is 0),
    the surrogate is 0 at every theta, no trial improves it, and the rule returns theta0 itself."""
    x, problem, call = run_update(ctx, problem, allow_nonfinite=True)
    tol = 4 * call.unit_roundoff * np.abs(problem.theta0) + TINY

    def diagnose(actual):
        if not np.all(np.isfinite(actual)):
            return ("constant advantages standardised to 0/0 = NaN (the std of a constant batch is 0 and nothing guards "
                    "it, e.g. no epsilon), and the NaN reached the parameters")
        return "the update moved although no step can improve a surrogate whose advantages are all 0"

    assert_close(x, problem.theta0, tol, what=f"trpo_update with constant advantages {problem.advantages.tolist()} "
                 "(trpo_advantage_normalization 'batch': they standardise to 0) vs theta0", call=call.code, diagnose=diagnose)


def verify_update(ctx, problem: UpdateProblem, *, constraint_only: bool = False) -> bool:
    """Run trpo_update; compare with the oracle's answer (or, ``constraint_only``, check KL(old || new) <=
    max_kl at the returned point). False when the example's decisions are too close to call."""
    beta, damp = backtrack_factor(ctx), damping(ctx)
    x, problem, call = run_update(ctx, problem)
    oracle = Oracle(problem, damp, beta, call.unit_roundoff, cg_stop(ctx), full=not constraint_only,
                    ratio=accept_ratio(ctx), standardise=standardises(ctx))
    if constraint_only:
        import torch

        moved = x - problem.theta0
        if not np.any(moved):
            return True
        kl = float(oracle.kl(torch.tensor(x)))
        reverse = float(oracle.reverse_kl(torch.tensor(x)))
        slack = oracle.c_eval * call.unit_roundoff * (kl + problem.max_kl + 1.0) * 2
        if kl > problem.max_kl + slack:
            raise ClauseFailure(
                f"trpo_update returned parameters with KL(old || new) = {kl:.6g} > max_kl = {problem.max_kl:g} "
                f"(KL(new || old) there = {reverse:.6g}); the TRPO constraint is KL(pi_old || pi_new) <= max_kl",
                table=mismatch_table("index", [(i, e, a, abs(e - a), 0.0) for i, (e, a) in enumerate(zip(problem.theta0, x))],
                                     headers=("theta0", "returned", "|moved|", "")),
                call=call.code,
                cause="the acceptance test measures KL(new || old) (sb3-contrib) or no KL at all, so a step outside the "
                      "trust region was accepted" if reverse <= problem.max_kl else "a step outside the trust region was accepted",
            )
        return True
    t_expected, robust, rows = oracle.expected()
    if not robust:
        return False
    t = 0.0 if t_expected is None else t_expected
    k = 0 if t_expected is None else round(math.log(t_expected) / math.log(beta))
    expected = problem.theta0 + t * oracle.step
    tol = oracle.tolerance(t, k)
    if t_expected is None:  # theta0 may be restored by undoing the last trial, theta0 + t s - t s (t <= 1,
        # sb3-contrib): two more roundings of u (|theta0| + |s_i|) each, where the candidate's own step s has
        # components up to max|Delta*| even where Delta*_i = 0 (its CG and damping differ from the oracle's)
        tol = tol + 4 * oracle.u * (np.abs(oracle.step) + np.max(np.abs(oracle.step)))

    def diagnose(actual):
        moved = actual - problem.theta0
        if oracle.ratio:
            compounded_t, compounded_k = compounded_rule_trial(oracle)
            if compounded_t is not None and compounded_t != t_expected and compounded_k >= 2 and matches(
                    actual, problem.theta0 + compounded_t * oracle.step, oracle.tolerance(compounded_t, compounded_k)):
                return (f"the result is trial k = {compounded_k}, which passes the accept-ratio test only against a predicted "
                        "gain compounded over the backtracks (g'Delta times the product of every step fraction so far, "
                        "skrl's expected_improvement *= alpha) instead of beta^k g'Delta")
        reverse_t, reverse_k = reverse_rule_trial(oracle)
        reverse = (reverse_t is not None and reverse_t != t_expected
                   and matches(actual, problem.theta0 + reverse_t * oracle.step, oracle.tolerance(reverse_t, reverse_k)))
        if t_expected is None and np.any(moved):
            last = beta ** (problem.max_backtracks - 1)
            if matches(actual, problem.theta0 + last * oracle.step, oracle.tolerance(last, problem.max_backtracks - 1)):
                if reverse:
                    return (f"the result is the rejected trial t = {last:g}: a line search that tests KL(new || old) accepts it "
                            "(sb3-contrib), or one that does not restore theta0 when every trial fails keeps it (bug E1)")
                return "no trial qualified, yet the last rejected trial was kept: theta0 is not restored (bug E1)"
        full = t != 1.0 and matches(actual, problem.theta0 + oracle.step, oracle.tolerance(1.0, 0))
        if full and reverse:
            return ("the full step was taken although KL(old || new) rejects it: no working line search (bug E2), or a "
                    "line search that tests KL(new || old), which accepts it here (sb3-contrib)")
        if reverse:
            return ("the result is the trial a KL(new || old) test accepts: the line search measures the KL in the reverse "
                    "direction (sb3-contrib's kl_divergence(new, old)); the TRPO constraint is KL(old || new)")
        if full:
            return "the full step was taken although it fails the test: no working line search (bug E2)"
        if np.any(moved) and np.linalg.norm(oracle.g) > 0:
            cos = moved @ oracle.g / (np.linalg.norm(moved) * np.linalg.norm(oracle.g))
            if cos > 1 - 1e-9:
                return ("the update follows the plain gradient: the Fisher-vector product is (close to) a multiple of v, as "
                        "when the KL is built from the current policy on both sides (bug E4)")
        return ""

    what = (f"trpo_update result vs theta0 + {t:g} Delta* ({'no trial qualifies: theta0' if t_expected is None else f'first k = {k}'}; "
            f"{declared(ctx)}; Delta* = {np.array2string(oracle.step, precision=6)} is the natural step of the exact Fisher; trials:\n"
            f"{describe_trials(rows, problem.max_kl, accept_ratio(ctx))}\n)")
    assert_close(x, expected, tol, what=what, call=call.code, diagnose=diagnose)
    return True


@st.composite
def update_problems(draw, families=("categorical", "gaussian"), standardise: bool = False):
    """``standardise``: the candidate standardises the advantages; they are drawn away from constant (whose
    standardisation is all rounding), and the gradient condition holds for the standardised ones."""
    kind = draw(st.sampled_from(families), label="family")
    B, m = draw(st.integers(2, 5), label="B"), draw(st.integers(1, 2), label="m")
    size = draw(st.integers(2, 3) if kind == "categorical" else st.integers(1, 2), label="actions / dims")
    features = draw(real_arrays((B, m), -1.5, 1.5), label="features")
    assume(np.linalg.matrix_rank(features) == m)
    policy = Policy(kind, features, size)
    theta0 = draw(real_arrays(policy.n_params, -1.0, 1.0), label="params")
    if kind == "categorical":
        actions = draw(hnp.arrays(np.int64, B, elements=st.integers(0, size - 1)), label="actions")
    else:
        actions = draw(real_arrays((B, size), -2.0, 2.0), label="actions")
    advantages = draw(real_arrays(B, -2.0, 2.0), label="advantages")
    assume(np.abs(advantages).max() > 0.1)
    if standardise:
        assume(advantages.std() > 0.1 * np.abs(advantages).max())
    max_kl = 10.0 ** draw(st.floats(-3.0, 0.0), label="log10 max_kl")
    max_backtracks = draw(st.integers(1, 10), label="max_backtracks")
    problem = UpdateProblem(policy, theta0, actions, advantages, max_kl, max_backtracks)
    F, _ = exact_fisher(policy, theta0)
    assume(condition(F + 1e-300 * np.eye(len(F)))[2] <= 1e3)
    used = standardised(advantages) if standardise else advantages
    assume(gradient_norm(problem, used) > 1e-3 * np.abs(used).mean())  # no natural direction at a stationary point
    return problem


def gradient_norm(problem: UpdateProblem, advantages=None) -> float:
    """|grad L(theta0)| (for ``advantages``, default the problem's): at 0 the natural step is 0/0 (no
    direction), which the protocol leaves undefined."""
    import torch

    theta = torch.tensor(problem.theta0, requires_grad=True)
    kind = torch.long if problem.policy.kind == "categorical" else torch.float64
    actions = torch.tensor(problem.actions, dtype=kind)
    logp = problem.policy(theta).log_prob(actions)
    used = problem.advantages if advantages is None else advantages
    surrogate = (torch.exp(logp - logp.detach()) * torch.tensor(used)).mean()
    (g,) = torch.autograd.grad(surrogate, theta)
    return float(g.norm())




ONE_STATE = [[1.0], [1.0], [1.0]]  # three samples of one state: the Fisher is that of one categorical
# Found by search so that the two KL directions disagree by a wide margin at the full step:
KL_DIRECTION_KNOWN = [
    # Gaussian, mean weight and log-std: full step KL(old||new) = 0.28 <= 0.5 < KL(new||old) = 0.66 (the std grows):
    # KL(old||new) accepts t = 1, KL(new||old) backtracks to t = 0.5. (First: only a reverse test explains t = 0.5.)
    UpdateProblem(Policy("gaussian", [[1.0], [1.0]], 1), [0.0, 1.0], [[-1.75], [2.25]], [-0.75, -0.25], max_kl=0.5),
    # categorical, logits (w1, w2, 0): full step KL(old||new) = 2.47 > 2 >= KL(new||old) = 1.50; half step
    # KL(old||new) = 0.68. KL(old||new) backtracks to t = 0.5, KL(new||old) keeps the full step.
    UpdateProblem(Policy("categorical", ONE_STATE, 3), [-0.25, 1.25], [0, 1, 2], [0.0, -0.25, 0.5], max_kl=2.0),
    # Gaussian, the std shrinks: full step KL(old||new) = 2.74 > 1 >= KL(new||old) = 0.66; half step 0.39.
    UpdateProblem(Policy("gaussian", [[1.0], [1.0]], 1), [0.5, -0.5], [[-0.25], [-1.75]], [-0.5, -1.25], max_kl=1.0),
]

UPDATE_KNOWN = [
    UpdateProblem(Policy("categorical", [[1.0, 0.5], [-0.5, 1.0], [0.25, -1.0]], 3), [0.3, -0.2, 0.5, 0.1], [0, 2, 1],
                  [1.0, -0.5, 0.75], max_kl=0.01),
    UpdateProblem(Policy("gaussian", [[1.0], [0.5], [-1.0]], 2), [0.2, -0.3, 0.0, -0.5],
                  [[0.5, -1.0], [1.5, 0.25], [-0.5, 0.5]], [1.0, -1.0, 0.5], max_kl=0.01),
    # bug E1 in a complete update: one trial, and its KL(old||new) = 2.47 exceeds max_kl = 2 -> theta0.
    UpdateProblem(Policy("categorical", ONE_STATE, 3), [-0.25, 1.25], [0, 1, 2], [0.0, -0.25, 0.5], max_kl=2.0,
                  max_backtracks=1),
]
# For a candidate that declares an accept ratio: with r = 0.5, beta = 0.5 and standardised advantages no trial of
# three gains half its prediction (the excess is -1.18, -0.51, -0.10) -> theta0; a prediction compounded over the
# backtracks (skrl 2.1.1) halves the third trial's prediction and accepts it.
ACCEPT_RATIO_UPDATE_KNOWN = [
    UpdateProblem(Policy("gaussian", [[0.0], [1.0]], 2), [0.0, -1.0, -1.0, -1.0], [[0.0, 0.0], [1.0, 0.0]], [0.0, -1.0],
                  max_kl=1.0, max_backtracks=3),
]
# For a candidate that standardises its advantages: constant ones standardise to 0 -> theta0.
CONSTANT_ADVANTAGES = [
    UpdateProblem(Policy("categorical", [[1.0, 0.5], [-0.5, 1.0], [0.25, -1.0]], 3), [0.3, -0.2, 0.5, 0.1], [0, 2, 1],
                  [0.75, 0.75, 0.75], max_kl=0.01),
    UpdateProblem(Policy("gaussian", [[1.0], [0.5], [-1.0]], 2), [0.2, -0.3, 0.0, -0.5],
                  [[0.5, -1.0], [1.5, 0.25], [-0.5, 0.5]], [0.75, 0.75, 0.75], max_kl=0.01),
]


@check("TRPO-LINE-SEARCH-KL-DIRECTION")
def line_search_kl_direction(ctx):
    """trpo_update tests KL(old || new): where the two directions disagree it returns the KL(old||new) answer,
    and on drawn problems the parameters it returns satisfy KL(old || new) <= max_kl."""
    kinds = families(ctx)
    for problem in KL_DIRECTION_KNOWN:
        if problem.policy.kind in kinds:
            verify_update(ctx, problem)
            for edge in problem.at_edges("max_kl", "max_backtracks"):  # judged against the oracle's exact answer
                verify_update(ctx, edge)
    ctx.property(update_problems(kinds, standardises(ctx)), lambda p: verify_update(ctx, p, constraint_only=True),
                 label="drawn", tier="known-answers-first-costly")


@check("TRPO-UPDATE-TRUST-REGION")
def update_trust_region(ctx):
    """trpo_update = theta0 + beta^k Delta* (the natural step of the exact Fisher) for the first qualifying k, else theta0."""
    kinds = families(ctx)
    for problem in UPDATE_KNOWN + (ACCEPT_RATIO_UPDATE_KNOWN if accept_ratio(ctx) else []):
        if problem.policy.kind in kinds:
            verify_update(ctx, problem)
    for problem in UPDATE_KNOWN[:2]:  # one of each family
        if problem.policy.kind in kinds:
            for edge in problem.at_edges("max_kl", "max_backtracks"):  # a vanishing and a wide trust region, a single trial
                verify_update(ctx, edge)
    if standardises(ctx):
        for problem in CONSTANT_ADVANTAGES:
            if problem.policy.kind in kinds:
                verify_constant_advantages(ctx, problem)
    ctx.property(update_problems(kinds, standardises(ctx)), lambda p: assume(verify_update(ctx, p)), label="drawn",
                 tier="known-answers-first-costly")


# ---------------------------------------------------------------------------------------------
# every line-search trial of a complete update, observed
#
# The policy handed to trpo_update records every parameter vector it is evaluated at. Those other than
# theta0 are the line search's trials (the gradient, the Fisher and the old distribution are all taken at
# theta0), in the order tried. Each is judged by the rule on the suite's exact surrogate and KL(pi_old ||
# pi_trial) at the trial itself, so no step oracle is involved: trial k must lie at theta0 + beta^k s
# (s = trial 0 - theta0, the candidate's own full step), the returned point must be the first trial that
# qualifies, and every earlier trial must fail the test (theta0 if none qualifies).
#
# tolerance. A trial's position: forming theta0 + beta^k s rounds (2k + 4) times on |theta0| + |s|
# (as for the line search), doubled for the way s itself was formed. A decision is robust when the gain
# (less the accept ratio's share ratio g'(trial - theta0)) and the KL's distance to max_kl exceed twice
# what the candidate's own evaluation of them can be off: c_eval u (|L(trial)| + mean |A|) and c_eval u
# (KL + max_kl + 1) with c_eval = 2 (B + K + 8) (the Oracle's), and for the share the candidate's g off
# by c_g u M_g (M_g = mean_b |A_b| |grad log pi(a_b|s_b)|, as in the Oracle) times |trial - theta0|.


class RecordedPolicy:
    """The suite's policy as trpo_update receives it, recording every parameter vector it is evaluated at."""

    def __init__(self, policy: "Policy"):
        self.policy, self.evaluated = policy, []

    def __call__(self, theta):
        self.evaluated.append(as_float64(theta).reshape(-1).copy())
        return self.policy(theta)

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def __repr__(self) -> str:
        return repr(self.policy)


def trials_of(evaluated, theta0: np.ndarray) -> list[np.ndarray]:
    """The distinct parameter vectors other than theta0, in the order first evaluated."""
    trials: list[np.ndarray] = []
    for theta in evaluated:
        if theta.shape != theta0.shape or np.array_equal(theta, theta0) or any(np.array_equal(theta, t) for t in trials):
            continue
        trials.append(theta)
    return trials


class TrialJudge:
    """The suite's exact surrogate, KL and gradient for one problem (float64, the Oracle's functions), and the
    margins of a decision at a trial."""

    def __init__(self, problem: UpdateProblem, u: float, ratio: float, standardise: bool):
        import torch
        from torch.autograd.functional import jacobian

        oracle = Oracle(problem, 0.0, 1.0, u, full=False, ratio=ratio, standardise=standardise)
        self.problem, self.u, self.ratio, self.torch = problem, u, ratio, torch
        self.advantages, self.c_eval = oracle.advantages, oracle.c_eval
        self.surrogate = lambda th: float(oracle.surrogate(th))
        self.kl = lambda th: float(oracle.kl(th))
        self.reverse_kl = lambda th: float(oracle.reverse_kl(th))  # for diagnoses: KL(new || old)
        theta0 = torch.tensor(problem.theta0)
        self.base = self.surrogate(theta0)
        leaf = theta0.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(oracle.surrogate(leaf), leaf)
        self.g = g.numpy()
        policy, B = problem.policy, problem.policy.batch
        kind = torch.long if policy.kind == "categorical" else torch.float64
        scores = jacobian(lambda th: policy(th).log_prob(torch.tensor(problem.actions, dtype=kind)), theta0).numpy()  # (B, P)
        self.M_g = float(np.linalg.norm(np.abs(self.advantages) @ np.abs(scores) / B))
        self.c_g = policy.n_params + (policy.size + 1 if policy.kind == "categorical" else 1) + B + 10

    def at(self, theta: np.ndarray):
        """(excess, kl, margin of the excess, margin of the kl): excess = gain - ratio g'(theta - theta0)."""
        t = self.torch.tensor(theta)
        value, kl = self.surrogate(t), self.kl(t)
        moved = theta - self.problem.theta0
        share = self.ratio * float(self.g @ moved)
        excess = value - self.base - share
        margin = 2 * self.c_eval * self.u * (abs(value) + float(np.mean(np.abs(self.advantages))))
        if self.ratio:
            margin += 2 * self.ratio * (self.c_g * self.u * self.M_g * float(np.linalg.norm(moved)) + self.c_eval * self.u * abs(share))
        return excess, kl, margin, 2 * self.c_eval * self.u * (kl + self.problem.max_kl + 1.0)


def verify_trials(ctx, problem: UpdateProblem) -> bool:
    """Run trpo_update with a recording policy and judge every trial it evaluated; False when there is nothing
    to judge (no trial, or a result that is neither theta0 nor a trial) or a decision too close to call."""
    beta, ratio = backtrack_factor(ctx), accept_ratio(ctx)
    x, problem, call, recorded = run_update(ctx, problem, record=True)
    theta0, u = problem.theta0, call.unit_roundoff
    trials = trials_of(recorded.evaluated, theta0)
    if not trials:
        return False
    judge = TrialJudge(problem, u, ratio, standardises(ctx))
    step = trials[0] - theta0
    rows = []
    for k, trial in enumerate(trials):
        position_tol = 2 * (2 * k + 4) * u * (np.abs(theta0) + np.abs(step)) + TINY
        expected = theta0 + beta**k * step
        if not matches(trial, expected, position_tol):
            fractions = [float((t - theta0) @ step / (step @ step)) for t in trials[:8]]
            raise ClauseFailure(
                f"trpo_update's trial {k} is not theta0 + {beta:g}^{k} (trial 0 - theta0): the trials it evaluated lie at "
                f"fractions {', '.join(f'{f:.6g}' for f in fractions)} of its full step", call=call.code,
                table=mismatch_table("index", [(i, e, a, abs(e - a), t) for i, (e, a, t) in enumerate(zip(expected, trial, position_tol))]),
                cause=f"the backtracking factor is not the declared {beta:g} (declare backtrack_factor), or the trials are not "
                      "shrinking copies of one full step")
        rows.append((k, *judge.at(trial)))
    tol0 = 4 * u * (np.abs(theta0) + np.abs(step)) + TINY
    if matches(x, theta0, tol0):
        returned = None
    else:
        returned = next((k for k, trial in enumerate(trials) if matches(x, trial, 4 * u * (np.abs(trial) + np.abs(step)) + TINY)), -1)
        if returned == -1:
            return False  # the result is neither theta0 nor a trial: TRPO-UPDATE-TRUST-REGION judges it
    max_kl = problem.max_kl
    test = f"gain > {ratio:g} x g'(trial - theta0)" if ratio else "gain > 0"

    reverse = [judge.reverse_kl(judge.torch.tensor(trial)) for trial in trials]

    def table():
        lines = ["  k   fraction     surrogate gain" + (" - share" if ratio else "") + "   KL(old||new)   KL(new||old)   verdict"]
        for k, excess, kl, m_gain, m_kl in rows:
            verdict = "qualifies" if excess > 0 and kl <= max_kl else ("no improvement" if excess <= 0 else f"KL > {max_kl:g}")
            mark = "  <- returned" if k == returned else ""
            lines.append(f"{k:>3}  {beta**k:>9.6g}  {excess:>17.6g}  {kl:>13.6g}  {reverse[k]:>13.6g}   {verdict}{mark}")
        return "\n".join(lines)

    decided = len(rows) if returned is None else returned + 1
    for k, excess, kl, m_gain, m_kl in rows[:decided]:
        if abs(excess) <= m_gain or abs(kl - max_kl) <= m_kl:
            return False  # too close to call
    for k, excess, kl, _, _ in rows[: returned if returned is not None else len(rows)]:
        if excess > 0 and kl <= max_kl:
            cause = (f"the line search tests KL(new || old) = {reverse[k]:.6g} > max_kl there (sb3-contrib's kl_divergence(new, "
                     "old)); the TRPO constraint is KL(old || new)") if reverse[k] > max_kl else ""
            raise ClauseFailure(
                f"trpo_update rejected trial {k} (fraction {beta**k:g} of its step), which qualifies ({test} and KL(old || new) "
                f"= {kl:.6g} <= max_kl = {max_kl:g}), and returned " + ("theta0" if returned is None else f"trial {returned}"),
                table=table(), call=call.code, diagnosed=bool(cause),  # else the usual suspects, not read from the numbers
                cause=cause or "the acceptance test is stricter than the rule (a sufficient-increase test not declared), or trials "
                               "are evaluated but their result ignored")
    if returned is not None:
        _, excess, kl, _, _ = rows[returned]
        if excess <= 0:
            none_qualifies = not any(e > 0 and kl_k <= max_kl for _, e, kl_k, _, _ in rows)
            first_in_budget = next((k for k, _, kl_k, _, _ in rows if kl_k <= max_kl), None)
            keeps_last = none_qualifies and returned == len(rows) - 1 == problem.max_backtracks - 1  # every trial tried
            unguarded = returned == first_in_budget
            if keeps_last != unguarded:  # where both read the same point the numbers cannot tell them apart
                cause = ("no trial qualifies and the last one is kept: the search must restore theta0 when every trial fails "
                         "(bug E1)") if keeps_last else ("the first trial within the KL budget is accepted without testing the "
                                                         "surrogate's improvement")
            else:
                cause = ""
            raise ClauseFailure(
                f"trpo_update returned trial {returned} (fraction {beta**returned:g} of its step), whose surrogate did not improve "
                f"({'gain less share' if ratio else 'gain'} {excess:.6g} <= 0; KL(old || new) = {kl:.6g})", table=table(), call=call.code,
                diagnosed=bool(cause),  # else the usual suspects, not read from the numbers
                cause=cause or "the line search accepts a trial without testing the surrogate's improvement (only the KL), or "
                               "tests it with the wrong sign")
        if kl > max_kl:
            raise ClauseFailure(
                f"trpo_update returned trial {returned} (fraction {beta**returned:g} of its step), whose KL(old || new) = {kl:.6g} "
                f"exceeds max_kl = {max_kl:g}", table=table(), call=call.code,
                cause=f"the line search tests KL(new || old) = {reverse[returned]:.6g} <= max_kl instead (sb3-contrib's "
                      "kl_divergence(new, old)); the TRPO constraint is KL(old || new)" if reverse[returned] <= max_kl else
                      "the KL constraint is not tested")
    elif len(trials) < problem.max_backtracks:
        raise ClauseFailure(
            f"trpo_update returned theta0 after {len(trials)} trials; the rule tries {problem.max_backtracks} before giving up",
            table=table(), call=call.code, cause="the line search stops before max_backtracks trials")
    if len(trials) > problem.max_backtracks:
        raise ClauseFailure(f"trpo_update evaluated {len(trials)} trials; max_backtracks is {problem.max_backtracks}",
                            table=table(), call=call.code, cause="the line search runs past max_backtracks")
    return True


def fisher_and_gradient(policy: "Policy", theta0: np.ndarray, actions: np.ndarray, advantages: np.ndarray):
    """(F, g) at theta0 in closed form for the suite's linear policies (no autograd: a strategy calls it on every
    draw). Categorical, logits [f_b W, 0]: F = mean_b kron(f_b f_b', diag(p_b) - p_b p_b') over the free logits,
    g = mean_b A_b kron(f_b, onehot(a_b) - p_b). Gaussian, mean f_b W and log-std s: F = kron(mean_b f_b f_b',
    diag(1 / sigma^2)) on W and 2 I on s; g = mean_b A_b [kron(f_b, (a_b - mu_b) / sigma^2), z_b^2 - 1]."""
    f, B = policy.features, policy.batch
    if policy.kind == "categorical":
        K = policy.size
        W = theta0.reshape(f.shape[1], K - 1)
        logits = np.concatenate([f @ W, np.zeros((B, 1))], axis=1)
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        free = p[:, : K - 1]
        F = sum(np.kron(np.outer(f[b], f[b]), np.diag(free[b]) - np.outer(free[b], free[b])) for b in range(B)) / B
        onehot = np.eye(K)[actions.astype(np.int64)][:, : K - 1]
        g = sum(advantages[b] * np.kron(f[b], onehot[b] - free[b]) for b in range(B)) / B
        return F, g
    D, m = policy.size, f.shape[1]
    W, log_std = theta0[: m * D].reshape(m, D), theta0[m * D:]
    var = np.exp(2 * log_std)
    mu = f @ W
    F = np.zeros((m * D + D, m * D + D))
    F[: m * D, : m * D] = np.kron(f.T @ f / B, np.diag(1 / var))
    F[m * D:, m * D:] = 2 * np.eye(D)
    z2 = (actions - mu) ** 2 / var
    g = np.concatenate([sum(advantages[b] * np.kron(f[b], (actions[b] - mu[b]) / var) for b in range(B)) / B,
                        (advantages[:, None] * (z2 - 1)).mean(0)])
    return F, g


def closed_form(policy: "Policy", theta0: np.ndarray, thetas: np.ndarray, actions: np.ndarray):
    """For parameter vectors ``thetas`` (T, P): log pi_theta0(a_b) (B,), mean_b KL(pi_theta0 || pi_theta) (T,) and
    log pi_theta(a_b) (T, B), in numpy closed form (a strategy evaluates them on every draw)."""
    f, B = policy.features, policy.batch
    if policy.kind == "categorical":
        K, rows = policy.size, np.arange(B)

        def log_softmax(theta):  # (..., B, K)
            W = theta.reshape(theta.shape[:-1] + (f.shape[1], K - 1))
            z = np.einsum("bi,...ik->...bk", f, W)
            z = np.concatenate([z, np.zeros(z.shape[:-1] + (1,))], axis=-1)
            top = z.max(-1, keepdims=True)
            return z - top - np.log(np.exp(z - top).sum(-1, keepdims=True))

        old, new = log_softmax(theta0), log_softmax(thetas)
        a = actions.astype(np.int64)
        kl = (np.exp(old) * (old - new)).sum(-1).mean(-1)
        return old[rows, a], kl, new[:, rows, a]
    D, m = policy.size, f.shape[1]

    def gaussian(theta):
        W, s = theta[..., : m * D].reshape(theta.shape[:-1] + (m, D)), theta[..., m * D:]
        return np.einsum("bi,...id->...bd", f, W), s[..., None, :]

    def log_prob(mu, s):
        return (-0.5 * (actions - mu) ** 2 / np.exp(2 * s) - s - 0.5 * math.log(2 * math.pi)).sum(-1)

    mu0, s0 = gaussian(theta0)
    mu, s = gaussian(thetas)
    kl = (s - s0 + (np.exp(2 * s0) + (mu0 - mu) ** 2) / (2 * np.exp(2 * s)) - 0.5).sum(-1).mean(-1)
    return log_prob(mu0, s0), kl, log_prob(mu, s)


@st.composite
def overshooting_problems(draw, families=("categorical", "gaussian"), standardise: bool = False, damp: float = 0.0):
    """Problems whose full step overshoots the surrogate's peak within the KL budget, so that a trial with
    KL(old || new) <= max_kl and no improvement comes before the accepted one (or none qualifies). Along the
    natural direction of a drawn problem (the exact step for max_kl = 1 with the declared damping, from the
    closed-form Fisher), the first t = 2^(j/2), j = 1..13, at which the surrogate has fallen below its start
    (by 1e-3 of mean |A|) while the exact KL stays under 0.8 of the quadratic model's t^2 sets max_kl = t^2:
    the full step then lands there. About one drawn problem in seven has such a t; conditioning does not
    matter here (every trial is judged where the candidate put it)."""
    kind = draw(st.sampled_from(families), label="family")
    B, m = draw(st.integers(2, 5), label="B"), draw(st.integers(1, 2), label="m")
    size = draw(st.integers(2, 3) if kind == "categorical" else st.integers(1, 2), label="actions / dims")
    features = draw(real_arrays((B, m), -1.5, 1.5), label="features")
    features[np.arange(m), np.arange(m)] += np.where(features[np.arange(m), np.arange(m)] < 0, -0.5, 0.5)  # keep it off rank 0
    assume(np.linalg.matrix_rank(features) == m)  # a non-singular Fisher
    policy = Policy(kind, features, size)
    theta0 = draw(real_arrays(policy.n_params, -1.0, 1.0), label="params")
    if kind == "categorical":
        actions = draw(hnp.arrays(np.int64, B, elements=st.integers(0, size - 1)), label="actions")
    else:
        actions = draw(real_arrays((B, size), -2.0, 2.0), label="actions")
    advantages = draw(real_arrays(B, -2.0, 2.0), label="advantages")
    advantages[0] += 0.5 if advantages[0] >= 0 else -0.5  # not all zero
    used = standardised(advantages) if standardise else advantages
    assume(np.abs(used).max() > 0.1)
    F, g = fisher_and_gradient(policy, theta0, actions.astype(np.float64), used)
    assume(np.linalg.norm(g) > 1e-3 * np.abs(used).mean())
    x = np.linalg.solve(damped(F, damp) + 1e-12 * np.eye(len(F)), g)
    assume(g @ x > 0)
    step = math.sqrt(2.0 / float(g @ x)) * x  # the natural step for max_kl = 1
    ts = 2.0 ** (np.arange(1, 14) / 2)
    with np.errstate(all="ignore"):  # far trials may overflow: they are then not candidates (inf or nan fails the tests)
        logp0, kl, logp = closed_form(policy, theta0, theta0[None, :] + ts[:, None] * step[None, :], actions)
        gain = (np.exp(logp - logp0) * used).mean(1) - used.mean()  # the surrogate at theta0 is mean(A)
    fallen = (gain < -1e-3 * float(np.mean(np.abs(used)))) & (kl <= 0.8 * ts**2)
    assume(fallen.any())
    t = ts[int(np.argmax(fallen))]
    return UpdateProblem(policy, theta0, actions, advantages, float(t * t), draw(st.integers(6, 10), label="max_backtracks"))


# The full step keeps KL(old || new) <= max_kl but lowers the surrogate (gain -0.107, KL 3.27 <= 8; Gaussian: -0.037,
# KL 0.68 <= 2); a later trial is accepted (categorical: the third, Gaussian: the second, at backtrack factor 0.5).
TRIAL_KNOWN = [
    UpdateProblem(Policy("categorical", [[-1.0, 0.0], [0.0, 0.5], [0.25, 0.0]], 2), [-0.75, -0.75], [1, 0, 0], [0.25, 0.0, -0.75],
                  max_kl=8.0),
    UpdateProblem(Policy("gaussian", [[-1.5], [0.25], [0.5]], 1), [-0.25, 0.0], [[0.0], [-1.0], [1.0]], [-0.25, 0.25, 1.25],
                  max_kl=2.0, max_backtracks=7),
]


@check("TRPO-UPDATE-LINE-SEARCH-TRIALS")
def update_line_search_trials(ctx):
    """Every trial trpo_update evaluated (recorded on the suite's policy) is judged: trial k at theta0 + beta^k s,
    the first qualifying one returned, every earlier one failing the test, theta0 only when none qualifies."""
    kinds = families(ctx)
    for problem in TRIAL_KNOWN:
        if problem.policy.kind in kinds:
            verify_trials(ctx, problem)
            for edge in problem.at_edges():  # one trial (max_backtracks 1), the gradient's direction (cg_iters 1), tiny or wide budgets
                verify_trials(ctx, edge)
    ctx.property(overshooting_problems(kinds, standardises(ctx), damping(ctx)), lambda p: assume(verify_trials(ctx, p)), label="drawn",
                 tier="known-answers-first-costly")

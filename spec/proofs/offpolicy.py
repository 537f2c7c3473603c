"""Proofs for the off-policy chapter: DDPG, TD3, SAC (spec/clauses/90_offpolicy.toml).

Notation: a target network theta' tracks an online network theta with weight tau; a categorical policy
pi over n actions with action values q_i and temperature alpha; a Gaussian sample a = mu + sigma eps,
eps ~ N(0, 1), whose expectations of polynomials are taken exactly through the moments
E[eps^k] = (k - 1)!! for even k and 0 for odd k.
"""

from __future__ import annotations

import sympy as sp

from .core import ProofResult, combine, identity, proof

tau = sp.Symbol("tau", positive=True)
alpha = sp.Symbol("alpha", positive=True)
eps = sp.Symbol("eps", real=True)
mu, theta, s = sp.symbols("mu theta s", real=True)
sigma = sp.Symbol("sigma", positive=True)
STEPS = (1, 2, 3, 4, 5)
ACTIONS = (2, 3)


# ---------------------------------------------------------------------------------------------
# Polyak averaging


def soft_update(target, online, weight):
    """``theta' <- tau theta + (1 - tau) theta'`` (DDPG §3)."""
    return weight * online + (1 - weight) * target


@proof(
    "offpolicy.polyak_exponential_average",
    statement="""n soft updates theta'_k = tau theta_k + (1 - tau) theta'_{k-1} make the target an exponential moving
    average of the online history: theta'_n = (1 - tau)^n theta'_0 + sum_{k=1}^n tau (1 - tau)^(n - k) theta_k, whose
    weights sum to 1 for every n (so a constant online network is a fixed point and the target is unbiased for it);
    tau = 1 is a copy (a hard update) and tau = 0 keeps the target.""",
    assumptions="tau > 0 symbolic; the recursion unrolled for n = 1..5 with symbolic parameters; the weight sum for symbolic n.",
)
def polyak_exponential_average(update=soft_update) -> ProofResult:
    steps = []
    for n in STEPS:
        start = sp.Symbol("target0", real=True)
        online = sp.symbols(f"online1:{n + 1}", real=True)
        current = start
        for value in online:
            current = update(current, value, tau)
        closed = (1 - tau) ** n * start + sum(tau * (1 - tau) ** (n - k) * online[k - 1] for k in range(1, n + 1))
        steps.append(identity(current, closed, f"n = {n}: unrolled updates = (1 - tau)^n theta'_0 + sum tau (1 - tau)^(n - k) theta_k"))
        steps.append(identity(current.subs({v: start for v in online}), start, f"n = {n}: a constant online network is a fixed point"))
    n, k = sp.symbols("n k", integer=True, positive=True)
    weights = (1 - tau) ** n + sp.summation(tau * (1 - tau) ** (n - k), (k, 1, n))
    steps.append(identity(sp.simplify(weights), 1, "the weights (1 - tau)^n + sum_k tau (1 - tau)^(n - k) sum to 1"))
    x, y = sp.symbols("x y", real=True)
    steps.append(identity(update(x, y, 1), y, "tau = 1 copies the online parameters"))
    steps.append(identity(update(x, y, 0), x, "tau = 0 keeps the target"))
    return combine(steps)


# ---------------------------------------------------------------------------------------------
# the soft value


def categorical(n: int, name: str):
    """n probabilities: n - 1 positive symbols and the remainder to 1."""
    free = list(sp.symbols(f"{name}0:{n - 1}", positive=True))
    return free + [1 - sum(free)]


def soft_value_definition(p, q, temperature):
    """``E_{a ~ pi}[Q(s, a) - alpha log pi(a|s)]`` (arXiv:1801.01290 eq. 3, with alpha)."""
    return sum(pi * (qi - temperature * sp.log(pi)) for pi, qi in zip(p, q))


@proof(
    "offpolicy.soft_value_entropy_sign",
    statement="""The soft value V(s) = E_{a ~ pi}[Q(s, a) - alpha log pi(a|s)] equals E_pi[Q] + alpha H(pi): the entropy
    bonus enters the soft Bellman target r + gamma V(s') as -alpha log pi, a plus on the entropy. It is the maximum-
    entropy objective's value: V = alpha log sum_a exp(Q(s, a)/alpha) - alpha KL(pi || softmax(Q/alpha)), so V is at
    most the soft maximum alpha log sum exp(Q/alpha), with equality exactly at the Boltzmann policy.""",
    assumptions="a categorical policy over n = 2, 3 actions with positive symbolic probabilities summing to 1; real symbolic Q; alpha > 0.",
)
def soft_value_entropy_sign(soft_value=soft_value_definition) -> ProofResult:
    steps = []
    for n in ACTIONS:
        p = categorical(n, "p")
        q = sp.symbols(f"q0:{n}", real=True)
        entropy = -sum(pi * sp.log(pi) for pi in p)
        expected_q = sum(pi * qi for pi, qi in zip(p, q))
        value = soft_value(p, q, alpha)
        steps.append(identity(sp.expand(value), sp.expand(expected_q + alpha * entropy), f"n = {n}: V = E_pi[Q] + alpha H(pi)"))
        # Gibbs' variational identity with pi* = exp(q / alpha) / Z.
        partition = sum(sp.exp(qi / alpha) for qi in q)
        boltzmann = [sp.exp(qi / alpha) / partition for qi in q]
        kl = sum(pi * (sp.log(pi) - sp.log(bi)) for pi, bi in zip(p, boltzmann))
        soft_max = alpha * sp.log(partition)
        steps.append(identity(sp.expand_log(value, force=True), sp.expand_log(soft_max - alpha * kl, force=True),
                              f"n = {n}: V = alpha log sum exp(Q / alpha) - alpha KL(pi || Boltzmann)"))
        at_boltzmann = soft_value(boltzmann, q, alpha)
        steps.append(identity(sp.expand_log(at_boltzmann, force=True), sp.expand_log(soft_max, force=True),
                              f"n = {n}: at pi = softmax(Q / alpha), V = alpha log sum exp(Q / alpha)"))
    return combine(steps)


# ---------------------------------------------------------------------------------------------
# the temperature


def temperature_loss_definition(log_alpha, log_probs, target_entropy):
    """``-mean_b log_alpha (log pi_b + H_target)``, log pi a constant (arXiv:1812.05905 §5, in log alpha)."""
    return -sum(log_alpha * (lp + target_entropy) for lp in log_probs) / len(log_probs)


@proof(
    "offpolicy.temperature_gradient_sign",
    statement="""The temperature loss -mean(log alpha (log pi + H_target)) has d/d log alpha = H_hat - H_target with
    H_hat = -mean(log pi): gradient descent raises alpha exactly when the batch's entropy estimate is below the
    target. The alpha form -mean(alpha (log pi + H_target)) has derivative alpha (H_hat - H_target): the same sign.
    When the batch enumerates a categorical policy (each action repeated in proportion to its probability), H_hat is
    the policy's entropy H(pi) exactly.""",
    assumptions="B = 1..4 symbolic log-probabilities; alpha = exp(log alpha) > 0; the enumeration for pi = (1/2, 1/4, 1/4).",
)
def temperature_gradient_sign(loss=temperature_loss_definition) -> ProofResult:
    log_alpha = sp.Symbol("log_alpha", real=True)
    target = sp.Symbol("H_target", real=True)
    steps = []
    for B in (1, 2, 3, 4):
        lp = sp.symbols(f"logp0:{B}", real=True)
        entropy_estimate = -sum(lp) / B
        steps.append(identity(sp.diff(loss(log_alpha, lp, target), log_alpha), entropy_estimate - target,
                              f"B = {B}: d loss / d log alpha = H_hat - H_target"))
        alpha_form = loss(sp.exp(log_alpha), lp, target)  # the same loss with alpha = exp(log alpha) in place of log alpha
        steps.append(identity(sp.diff(alpha_form, log_alpha), sp.exp(log_alpha) * (entropy_estimate - target),
                              f"B = {B}: the alpha form's derivative is alpha (H_hat - H_target)"))
    enumerated = [sp.log(sp.Rational(1, 2))] * 2 + [sp.log(sp.Rational(1, 4))] * 2  # a0, a0, a1, a2 under (1/2, 1/4, 1/4)
    policy_entropy = -sum(p * sp.log(p) for p in (sp.Rational(1, 2), sp.Rational(1, 4), sp.Rational(1, 4)))
    steps.append(identity(sp.expand_log(sp.diff(loss(log_alpha, enumerated, target), log_alpha), force=True),
                          sp.expand_log(policy_entropy - target, force=True), "enumerated batch: H_hat = H(pi) = 3/2 log 2"))
    return combine(steps)


# ---------------------------------------------------------------------------------------------
# gradients of expectations over a Gaussian sample


def gaussian_expectation(expr):
    """``E[expr]`` for eps ~ N(0, 1), expr polynomial in eps: the moments (k - 1)!! for even k, 0 for odd k."""
    poly = sp.Poly(sp.expand(expr), eps)
    return sum(coeff * (sp.factorial2(k - 1) if k % 2 == 0 else 0) for (k,), coeff in poly.terms())


def critic_polynomial():
    """A cubic action value Q(a) = c0 + c1 a + c2 a^2 + c3 a^3 with symbolic coefficients."""
    c = sp.symbols("c0:4", real=True)
    return lambda a: c[0] + c[1] * a + c[2] * a**2 + c[3] * a**3


def pathwise_mean_gradient(f, mean, std):
    """The reparameterised estimator of d/d mu E[f(mu + sigma eps)]: f'(mu + sigma eps), through the sample."""
    a = sp.Symbol("a", real=True)
    return sp.diff(f(a), a).subs(a, mean + std * eps)


@proof(
    "offpolicy.reparameterised_gradient",
    statement="""For a = mu + sigma eps, eps ~ N(0, 1), the reparameterised (pathwise) gradient is unbiased:
    E[f'(a)] = d/d mu E[f(a)] = E[f(a) eps / sigma] (the score-function estimator), and E[f'(a) eps] = d/d sigma E[f(a)]
    = E[f(a) (eps^2 - 1) / sigma]: differentiating through the sample, as SAC's actor loss does, gives the gradient of
    the expected objective.""",
    assumptions="f a cubic with symbolic coefficients (exact Gaussian moments); sigma > 0.",
)
def reparameterised_gradient(pathwise=pathwise_mean_gradient) -> ProofResult:
    f = critic_polynomial()
    sample = mu + sigma * eps
    objective = gaussian_expectation(f(sample))
    a = sp.Symbol("a", real=True)
    steps = [
        identity(gaussian_expectation(pathwise(f, mu, sigma)), sp.diff(objective, mu), "E[pathwise] = d/d mu E[f(mu + sigma eps)]"),
        identity(gaussian_expectation(f(sample) * eps / sigma), sp.diff(objective, mu), "E[f(a) eps / sigma] = d/d mu E[f(a)] (score function)"),
        identity(gaussian_expectation(sp.diff(f(a), a).subs(a, sample) * eps), sp.diff(objective, sigma),
                 "E[f'(a) eps] = d/d sigma E[f(a)]"),
        identity(gaussian_expectation(f(sample) * (eps**2 - 1) / sigma), sp.diff(objective, sigma),
                 "E[f(a) (eps^2 - 1) / sigma] = d/d sigma E[f(a)] (score function)"),
    ]
    return combine(steps)


def dpg_formula(q, actor, parameter):
    """``grad_a Q(a)|_{a = mu(theta)} grad_theta mu(theta)`` (Silver et al. 2014, Theorem 1)."""
    a = sp.Symbol("a", real=True)
    return sp.diff(q(a), a).subs(a, actor) * sp.diff(actor, parameter)


@proof(
    "offpolicy.deterministic_policy_gradient_chain_rule",
    statement="""The deterministic policy gradient grad_a Q(s, a)|_{a = mu_theta(s)} grad_theta mu_theta(s) is the gradient
    of Q(s, mu_theta(s)), and the limit sigma -> 0 of the stochastic policy gradient E_{a ~ N(mu_theta, sigma^2)}[Q(s, a)
    grad_theta log pi(a|s)] (Silver et al. 2014, Theorems 1 and 2), here for an actor nonlinear in its parameter,
    mu = theta s + b theta^3.""",
    assumptions="""Q a cubic in the action with symbolic coefficients; a polynomial actor (a tanh actor gives the same identities but
    sends SymPy's simplification of a wrong version into minutes); the Gaussian expectation through exact moments; sigma > 0.""",
)
def deterministic_policy_gradient_chain_rule(gradient=dpg_formula) -> ProofResult:
    q = critic_polynomial()
    b = sp.Symbol("b", real=True)
    actor = theta * s + b * theta**3
    dpg = gradient(q, actor, theta)
    steps = [identity(sp.diff(q(actor), theta), dpg, "d/d theta Q(mu_theta) = grad_a Q grad_theta mu")]
    # Stochastic policy gradient of pi = N(mu_theta, sigma^2): grad_theta log pi(a) = (a - mu) / sigma^2 grad_theta mu.
    m = sp.Symbol("m", real=True)  # mu_theta as a symbol, so the expectation is polynomial
    score = eps / sigma  # (a - mu) / sigma^2 with a = mu + sigma eps, per unit grad_theta mu
    stochastic = gaussian_expectation(q(m + sigma * eps) * score) * sp.diff(actor, theta)
    # E[Q(m + sigma eps) eps] / sigma is a polynomial in sigma (the odd moments vanish), so its limit at 0 is its value there.
    limit = sp.expand(stochastic).subs(sigma, 0).subs(m, actor)
    steps.append(identity(limit, dpg, "lim sigma -> 0 of the stochastic policy gradient = the deterministic one"))
    return combine(steps)

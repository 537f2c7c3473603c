"""Proofs for the normalisation-and-diagnostics chapter (spec/clauses/35_normalisation.toml).

Statistics of a sample are (m, v, n): the mean, the population variance (divided by n) and the count.
Chan, Golub and LeVeque's pairwise update (1983) combines two samples' statistics:

    n = n_a + n_b,   delta = m_b - m_a,   m = m_a + delta n_b / n,   v = (n_a v_a + n_b v_b + delta^2 n_a n_b / n) / n

Samples are lists of real symbols; a prior pseudo-batch has a positive symbolic count c, mean 0 and variance 1.
"""

from __future__ import annotations

import sympy as sp

from .. import contract
from .core import ProofResult, combine, identity, proof
from .kl import ESTIMATORS, _published, kl_divergence  # k1 = -x, k2 = x^2 / 2, k3 = e^x - 1 - x of x = log r
from .pg import all_of, nonzero, rational_identity


def statistics(xs):
    """``(m, v, n)`` of a list of values: the definitions."""
    n = len(xs)
    m = sum(xs) / sp.Integer(n)
    return m, sum((x - m) ** 2 for x in xs) / n, sp.Integer(n)


def chan_merge(a, b):
    """The pairwise update of two statistics ``(m, v, n)``."""
    (m_a, v_a, n_a), (m_b, v_b, n_b) = a, b
    n = n_a + n_b
    delta = m_b - m_a
    return m_a + delta * n_b / n, (n_a * v_a + n_b * v_b + delta**2 * n_a * n_b / n) / n, n


def _same_statistics(got, want, label: str) -> ProofResult:
    return combine([rational_identity(got[0], want[0], f"{label}: the mean"),
                    rational_identity(got[1], want[1], f"{label}: the variance"),
                    rational_identity(got[2], want[2], f"{label}: the count")])


@proof(
    "normalisation.chan_merge_is_concatenation",
    statement="""Merging two samples' statistics by the pairwise update gives the statistics (mean, population
    variance, count) of the concatenated sample, for samples of 1 to 3 values each; the update is symmetric and
    associative (three samples merged as ((a, b), c) and (a, (b, c)) agree), so folding batches in one at a
    time (Welford: batches of one value, variance 0) in any grouping gives the statistics of the stream. The
    contract's known answers: [1, 3] then [5, 7] has mean 4 and variance 5; (1, 2, 3) merged with (4, 1, 1)
    has mean 7/4 and variance 55/16.""",
    assumptions="Real symbolic values; the statistics of a sample are its definitions (mean, sum of squared "
                "deviations over n).",
)
def chan_merge_is_concatenation(merge=chan_merge) -> ProofResult:
    steps = []
    for size_a, size_b in ((1, 1), (1, 2), (2, 2), (3, 1)):
        a = list(sp.symbols(f"a0:{size_a}", real=True))
        b = list(sp.symbols(f"b0:{size_b}", real=True))
        steps.append(_same_statistics(merge(statistics(a), statistics(b)), statistics(a + b),
                                      f"merge of {size_a} and {size_b} values = the concatenation"))
    a, b, c = (list(sp.symbols(f"{name}0:{k}", real=True)) for name, k in (("a", 2), ("b", 1), ("c", 2)))
    sa, sb, sc = statistics(a), statistics(b), statistics(c)
    steps.append(_same_statistics(merge(sa, sb), merge(sb, sa), "the merge is symmetric"))
    steps.append(_same_statistics(merge(merge(sa, sb), sc), merge(sa, merge(sb, sc)), "((a, b), c) = (a, (b, c))"))
    welford = (a[0], sp.Integer(0), sp.Integer(1))
    for x in a[1:] + b + c:
        welford = merge(welford, (x, sp.Integer(0), sp.Integer(1)))
    steps.append(_same_statistics(welford, statistics(a + b + c), "one value at a time (Welford) = the stream"))
    two = contract.known_answer("normalisation.moments-two-batches")
    rows = two.exact("x")
    first = [statistics([r[d] for r in rows[:2]]) for d in range(2)]
    second = [statistics([r[d] for r in rows[2:]]) for d in range(2)]
    for d in range(2):
        got = merge(first[d], second[d])
        steps.append(identity(got[0], two.exact("mean")[d], f"{two.id}: mean[{d}]"))
        steps.append(identity(got[1], two.exact("var")[d], f"{two.id}: var[{d}]"))
    pair = contract.known_answer("normalisation.merge")
    got = merge((pair.exact("mean_a")[0], pair.exact("var_a")[0], pair.exact("count_a")),
                (pair.exact("mean_b")[0], pair.exact("var_b")[0], pair.exact("count_b")))
    steps += [identity(got[0], pair.exact("mean")[0], f"{pair.id}: mean"), identity(got[1], pair.exact("var")[0], f"{pair.id}: var"),
              identity(got[2], pair.exact("count"), f"{pair.id}: count")]
    return combine(steps)


@proof(
    "normalisation.initial_count_effect",
    statement="""Statistics that start as a pseudo-batch of count c with mean 0 and variance 1 and then fold in n
    values of mean m and population variance v hold the mean n m / (n + c) and the variance (c (1 + m'^2) + n (v +
    (m - m')^2)) / (n + c) with m' = n m / (n + c): the data plus c samples' worth of a standard normal prior, which
    vanishes as c -> 0. With c = 1e-4 and the batch [2, 4]: 2.99985000749963 and 1.00044995500337.""",
    assumptions="c > 0 symbolic; n = 2 and 3 real symbolic values; the prior merged by the pairwise update. The "
                "known answer's c is the float64 number nearest 1e-4, exactly.",
)
def initial_count_effect(prior_variance=sp.Integer(1)) -> ProofResult:
    c = sp.Symbol("c", positive=True)
    steps = []
    for n in (2, 3):
        xs = list(sp.symbols(f"x0:{n}", real=True))
        m, v, count = statistics(xs)
        got = chan_merge((sp.Integer(0), prior_variance, c), (m, v, count))
        shrunk = n * m / (n + c)
        steps.append(rational_identity(got[0], shrunk, f"n = {n}: mean = n m / (n + c)"))
        steps.append(rational_identity(got[1], (c * (1 + shrunk**2) + n * (v + (m - shrunk) ** 2)) / (n + c),
                                       f"n = {n}: variance = (c (1 + m'^2) + n (v + (m - m')^2)) / (n + c)"))
        steps.append(identity(sp.limit(got[1], c, 0), v, f"n = {n}: c -> 0 leaves the data's variance"))
    answer = contract.known_answer("normalisation.moments-prior-count")
    count = sp.Rational(answer.conventions["moments_initial_count"])  # the float 1e-4, exactly
    data = statistics([row[0] for row in answer.exact("x")])
    got = chan_merge((sp.Integer(0), prior_variance, count), data)
    steps.append(_published(got[0], answer.exact("mean")[0], answer.published_error("mean"), f"{answer.id}: mean"))
    steps.append(_published(got[1], answer.exact("var")[0], answer.published_error("var"), f"{answer.id}: var"))
    return combine(steps)


def accumulate(rewards, ends, gamma):
    """The return accumulator ``R_t = gamma R_{t-1} + r_t``, reset to 0 after a step that ends an episode."""
    out, running = [], sp.Integer(0)
    for r, end in zip(rewards, ends):
        running = gamma * running + r
        out.append(running)
        if end:
            running = sp.Integer(0)
    return out


@proof(
    "normalisation.return_accumulator",
    statement="""The accumulator R_t = gamma R_{t-1} + r_t, reset after every episode end, is the discounted sum of
    the episode's rewards so far, sum_{j = s}^{t} gamma^(t - j) r_j from the episode's first step s (so a terminated
    or truncated step adds its own reward and the next step starts from r). Dividing every reward by a constant
    sigma > 0 divides every return by sigma (the objective's ordering is unchanged); subtracting a constant mu
    from every reward changes an episode's return by mu (1 - gamma^L) / (1 - gamma), which depends on its length
    L: centring changes the objective. The known answer (gamma 1/2, rewards 1, an end after step 1): accumulators
    1, 3/2, 1 and the variances 1/16 and 1/12 of the returns seen by steps 1 and 2.""",
    assumptions="gamma and the rewards real symbols (gamma != 1 for the geometric sum); 5 steps with every pattern "
                "of episode ends at steps 0..3.",
)
def return_accumulator(accumulate=accumulate) -> ProofResult:
    gamma = sp.Symbol("gamma", positive=True)
    rewards = list(sp.symbols("r0:5", real=True))
    def unrolled():
        for pattern in range(16):
            ends = [bool(pattern >> t & 1) for t in range(4)] + [False]
            got = accumulate(rewards, ends, gamma)
            for t in range(5):
                start = max([s + 1 for s in range(t) if ends[s]], default=0)
                closed = sum(gamma ** (t - j) * rewards[j] for j in range(start, t + 1))
                yield identity(got[t], closed, f"ends {pattern:04b}: R_{t} = sum_(j=s)^t gamma^(t-j) r_j")

    steps = [all_of(unrolled(), "every pattern of episode ends over 5 steps: R_t = sum_(j=s)^t gamma^(t-j) r_j")]
    sigma, mu = sp.Symbol("sigma", positive=True), sp.Symbol("mu", real=True)
    ends = [False] * 4 + [True]
    scaled = accumulate([r / sigma for r in rewards], ends, gamma)
    steps.append(identity(scaled[-1], accumulate(rewards, ends, gamma)[-1] / sigma, "rewards / sigma: every return / sigma"))
    for length in (1, 2, 4):
        shifted = accumulate([r - mu for r in rewards[:length]], [False] * length, gamma)[-1]
        # the return from the episode's start: sum gamma^j r_j; R_t weights by gamma^(t - j), the same sum reversed
        plain = accumulate(rewards[:length], [False] * length, gamma)[-1]
        steps.append(rational_identity(plain - shifted, mu * (1 - gamma**length) / (1 - gamma),
                                       f"L = {length}: centred rewards lower the return by mu (1 - gamma^L) / (1 - gamma)"))
    answer = contract.known_answer("normalisation.rewards")
    gamma_, r = answer.exact("gamma"), answer.exact("rewards")
    ended = [[a or b for a, b in zip(ta, tb)] for ta, tb in zip(answer.inputs["terminated"], answer.inputs["truncated"])]
    columns = [accumulate([row[j] for row in r], [row[j] for row in ended], gamma_) for j in range(len(r[0]))]
    seen = []
    for t, expected_variance in ((0, 0), (1, sp.Rational(1, 16)), (2, sp.Rational(1, 12))):
        seen += [column[t] for column in columns]
        steps.append(identity(statistics(seen)[1], expected_variance, f"{answer.id}: the returns' variance after step {t}"))
    steps.append(identity(columns[1][2], 1, f"{answer.id}: the terminated column restarts at step 2"))
    steps.append(identity(columns[2][2], 1, f"{answer.id}: the truncated column restarts at step 2"))
    return combine(steps)


@proof(
    "normalisation.ratio_pair_estimators",
    statement="""The mean of an estimator over samples is the statistic a PPO log reports. Two samples with ratios
    2 and 1/2 average to exactly 1/4 for k3, 0 for k1 and (log 2)^2 / 2 for k2: a log whose value is k1's is not
    k3's. Ten samples drawn by pi_old in the exact proportions of p = (1/5, 3/10, 1/2), with pi_new = q = (2/5, 2/5,
    1/5), average to KL(p || q) for k1 and k3 (the mean over samples is the expectation under the sampler), which
    differs from KL(q || p): the direction is that of the samples' distribution.""",
    assumptions="log r = logp_new - logp_old; the ten samples' log-probabilities are logs of exact rationals.",
)
def ratio_pair_estimators(estimators=ESTIMATORS) -> ProofResult:
    steps = []
    pair = [sp.log(2), -sp.log(2)]
    mean = lambda k, xs: sp.Rational(1, len(xs)) * sum(k(x) for x in xs)
    answer = contract.known_answer("normalisation.approx-kl-ratio-pair")
    steps.append(identity(sp.simplify(mean(estimators["k3"], pair)), sp.Rational(1, 4), "k3 at ratios 2, 1/2: 1/4"))
    steps.append(identity(mean(estimators["k1"], pair), 0, "k1 at ratios 2, 1/2: 0"))
    steps.append(identity(mean(estimators["k2"], pair), sp.log(2) ** 2 / 2, "k2 at ratios 2, 1/2: (log 2)^2 / 2"))
    steps.append(_published(mean(estimators["k2"], pair), answer.exact("k2"), answer.published_error("k2"), f"{answer.id}: k2"))
    p = [sp.Rational(1, 5), sp.Rational(3, 10), sp.Rational(1, 2)]
    q = [sp.Rational(2, 5), sp.Rational(2, 5), sp.Rational(1, 5)]
    samples = [0, 0, 1, 1, 1, 2, 2, 2, 2, 2]  # outcome of each sample: 10 p
    log_r = [sp.log(q[i]) - sp.log(p[i]) for i in samples]
    forward, backward = kl_divergence(p, q), kl_divergence(q, p)
    categorical = contract.known_answer("normalisation.approx-kl-categorical")
    for kind in ("k1", "k3"):
        steps.append(identity(sp.expand_log(mean(estimators[kind], log_r), force=True), sp.expand_log(forward, force=True),
                              f"{kind} over the ten samples = KL(p || q)"))
    steps.append(_published(forward, categorical.exact("kl"), categorical.published_error("kl"), f"{categorical.id}: KL(p || q)"))
    steps.append(_published(mean(estimators["k2"], log_r), categorical.exact("k2"), categorical.published_error("k2"), f"{categorical.id}: k2"))
    steps.append(_published(backward, categorical.exact("KL(q || p)"), categorical.published_error("KL(q || p)"),
                            f"{categorical.id}: KL(q || p)"))
    steps.append(nonzero(forward - backward, "KL(p || q) - KL(q || p)"))
    return combine(steps)


def variance(xs, ddof=0):
    """The variance of a list with the divisor ``n - ddof``."""
    n = len(xs)
    return sum((x - sum(xs) / n) ** 2 for x in xs) / (n - ddof)


def explained(values, returns, ddof=0):
    """``1 - Var[R - V] / Var[R]`` with the same divisor ``n - ddof`` for both variances."""
    return 1 - variance([r - v for r, v in zip(returns, values)], ddof) / variance(returns, ddof)


@proof(
    "normalisation.explained_variance_identities",
    statement="""The explained variance 1 - Var[R - V] / Var[R] does not depend on the variances' divisor when both
    use the same one (n or n - 1), is 1 for V = R + b (a perfect critic off by a constant), 0 for the constant
    critic V = mean(R), and with the arguments swapped is another number: returns [1, 2, 3, 4] and values [1,
    1, 4, 4] give 3/5, swapped 7/9; the residual's variance unbiased and the returns' population one give 7/15.""",
    assumptions="n = 3 and 4 real symbolic returns and values; Var[R] != 0.",
)
def explained_variance_identities(explained=explained) -> ProofResult:
    steps = []
    b = sp.Symbol("b", real=True)
    for n in (3, 4):
        R = list(sp.symbols(f"R0:{n}", real=True))
        V = list(sp.symbols(f"V0:{n}", real=True))
        steps.append(rational_identity(explained(V, R, 0), explained(V, R, 1), f"n = {n}: divisor n = divisor n - 1"))
        steps.append(rational_identity(explained([r + b for r in R], R), 1, f"n = {n}: V = R + b gives 1"))
        steps.append(rational_identity(explained([sum(R) / n] * n, R), 0, f"n = {n}: V = mean(R) gives 0"))
    answer = contract.known_answer("normalisation.explained-variance")
    values, returns = answer.exact("values"), answer.exact("returns")
    steps.append(identity(explained(values, returns), answer.exact("explained_variance"), f"{answer.id}: 3/5"))
    steps.append(identity(explained(returns, values), sp.Rational(7, 9), f"{answer.id}: swapped, 7/9"))
    mixed = 1 - variance([r - v for r, v in zip(returns, values)], 1) / variance(returns, 0)
    steps.append(identity(mixed, sp.Rational(7, 15), f"{answer.id}: unbiased residual over population returns, 7/15"))
    return combine(steps)


def entropy(p):
    return -sum(pi * sp.log(pi) for pi in p)


@proof(
    "normalisation.entropy_of_the_mean",
    statement="""The entropy of the batch's average distribution exceeds the batch's mean entropy by the mean KL
    of each row from the average, H(mean_i p_i) - mean_i H(p_i) = mean_i KL(p_i || mean_j p_j) >= 0 (concavity), so
    it is not the policy's entropy: two deterministic rows on different actions have mean entropy 0 and an average
    of entropy log 2. A uniform row over A actions has entropy log A.""",
    assumptions="Two categorical rows over 2 and 3 actions with positive symbolic probabilities.",
)
def entropy_of_the_mean(entropy=entropy) -> ProofResult:
    steps = []
    for actions in (2, 3):  # (the identities of 2 actions first: a wrong entropy fails there, before the costlier 3)
        if steps and not steps[-1].ok:
            break
        rows = []
        for name in ("p", "q"):
            free = list(sp.symbols(f"{name}0:{actions - 1}", positive=True))
            rows.append(free + [1 - sum(free)])
        average = [(a + b) / 2 for a, b in zip(*rows)]
        gap = entropy(average) - (entropy(rows[0]) + entropy(rows[1])) / 2
        mean_kl = (kl_divergence(rows[0], average) + kl_divergence(rows[1], average)) / 2
        steps.append(identity(sp.expand(sp.expand_log(gap, force=True)), sp.expand(sp.expand_log(mean_kl, force=True)),
                              f"{actions} actions: H(mean p) - mean H(p) = mean KL(p_i || mean p)"))
        steps.append(identity(sp.simplify(entropy([sp.Rational(1, actions)] * actions)), sp.log(actions),
                              f"uniform over {actions} actions: log {actions}"))
    answer = contract.known_answer("normalisation.entropy")
    steps.append(_published(entropy([sp.Rational(1, 2)] * 2), answer.exact("entropy of the average distribution"),
                            answer.published_error("entropy of the average distribution"), f"{answer.id}: log 2"))
    return combine(steps)

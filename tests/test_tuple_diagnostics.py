"""The tuple diagnostics (issue 28): the whole-tuple channel of SPL, SMP, RS+FD and RS+RFD against brute-force
constructions from their parts, its rank and identifiable marginals, and its exact privacy levels against the
closed forms of docs/tuples-privacy.md and a double loop over pairs of tuples."""

from __future__ import annotations

import math
from functools import reduce
from itertools import product

import numpy as np
import pytest
from typer.testing import CliRunner

import ldpsim
from ldpsim import ParameterError, Product, ScenarioError, get_registry, mechanism_report, parse_domain
from ldpsim.output.cli import app
from ldpsim.theory import tuples as diag
from ldpsim.theory.tuples import (
    identifiability,
    interaction_dimension,
    joint_channel,
    joint_log_channel,
    joint_outputs,
    tuple_privacy,
    tuple_report,
)

runner = CliRunner()
SIZES = [(2, 3), (3, 2), (2, 4), (3, 3), (2, 3, 4), (2, 2, 2), (4, 2, 3)]


def domain(sizes: tuple[int, ...]) -> Product:
    return Product(
        attributes=[{"name": f"a{j}", "kind": "integers", "low": 0, "high": k - 1} for j, k in enumerate(sizes)]
    )


def make(name: str, sizes: tuple[int, ...], **params):
    return get_registry().create("mechanism", name, domain(sizes), **{"eps": 1.0, **params})


def skewed_prior(sizes: tuple[int, ...]) -> np.ndarray:
    """A product prior whose marginals are proportional to 1, 2, ..., k (the smallest value is rare)."""
    marginals = [np.arange(1, k + 1) / (k * (k + 1) / 2) for k in sizes]
    return reduce(lambda a, b: np.outer(a, b).ravel(), marginals)


def kron(*matrices: np.ndarray) -> np.ndarray:
    return reduce(np.kron, matrices)


# ------------------------------------------------------------------------- brute-force channels


def fake_rows(mech, j: int) -> np.ndarray:
    """The law of attribute j's report when it is fake data, built from its part alone."""
    part, local = mech.parts[j], mech.local
    k = part.domain.size
    prior = mech.domain.marginal(mech.prior, j) if mech.name == "rsrfd" else np.full(k, 1.0 / k)
    if local == "grr":
        return prior  # sent as it is
    if local == "oue-z":  # every bit 1 w.p. q
        bits = (np.arange(1 << k)[:, None] >> np.arange(k)) & 1
        ones = bits.sum(axis=1)
        return part.q**ones * (1 - part.q) ** (k - ones)
    return prior @ part.matrix  # oue-r: OUE of a value drawn from the prior (uniform for rsfd)


def rsfd_brute(mech) -> np.ndarray:
    """(1/d) sum_j F_0 (x) ... (x) P_j (x) ... (x) F_{d-1}, F_i the fake law repeated on every row."""
    d = len(mech.parts)
    fakes = [np.outer(np.ones(p.domain.size), fake_rows(mech, i)) for i, p in enumerate(mech.parts)]
    terms = [kron(*[p.matrix if i == j else fakes[i] for i, p in enumerate(mech.parts)]) for j in range(d)]
    return sum(terms) / d


def smp_brute(mech) -> np.ndarray:
    """Blocks (1/d) 1 (x) P_j (x) 1 over the attribute index: the report names j, then j's report."""
    d = len(mech.parts)
    ones = [np.ones((p.domain.size, 1)) for p in mech.parts]
    blocks = [kron(*[p.matrix if i == j else ones[i] for i, p in enumerate(mech.parts)]) for j in range(d)]
    return np.hstack(blocks) / d


@pytest.mark.parametrize("sizes", SIZES)
def test_spl_channel_is_the_kronecker_product_of_its_parts(sizes):
    mech = make("spl", sizes)
    m = joint_channel(mech)
    np.testing.assert_allclose(m, kron(*[p.matrix for p in mech.parts]), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("sizes", SIZES)
def test_smp_channel_is_block_diagonal_over_the_index(sizes):
    mech = make("smp", sizes)
    np.testing.assert_allclose(joint_channel(mech), smp_brute(mech), rtol=1e-12, atol=1e-15)
    reports = joint_outputs(mech)
    assert reports.shape == (sum(sizes), 2) and set(reports[:, 0]) == set(range(len(sizes)))


def test_smp_with_mixed_parts_and_unary_reports():
    mech = make("smp", (3, 2), per_attribute=[{"mechanism": "oue", "eps": 0.5}, {"mechanism": "krr"}])
    m = joint_channel(mech)
    assert m.shape == (6, 8 + 2)
    np.testing.assert_allclose(m, smp_brute(mech), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("local", ["grr", "oue-z", "oue-r"])
@pytest.mark.parametrize("sizes", [(2, 3), (3, 3), (2, 2, 3), (3, 2, 2)])
def test_rsfd_channel_is_the_mixture_over_the_sampled_attribute(sizes, local):
    mech = make("rsfd", sizes, local=local)
    m = joint_channel(mech)
    np.testing.assert_allclose(m, rsfd_brute(mech), rtol=1e-11, atol=1e-15)
    np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("local", ["grr", "oue-r"])
def test_rsrfd_channel_uses_the_priors_marginals(local):
    sizes = (2, 3, 2)
    mech = make("rsrfd", sizes, local=local, prior=skewed_prior(sizes))
    np.testing.assert_allclose(joint_channel(mech), rsfd_brute(mech), rtol=1e-11, atol=1e-15)


def test_log_channel_is_the_log_of_the_channel():
    mech = make("rsfd", (2, 3), local="oue-z")
    np.testing.assert_allclose(np.exp(joint_log_channel(mech)), joint_channel(mech), rtol=1e-13)


# ------------------------------------------------------------------------------------ refusals


def test_only_tuple_mechanisms():
    krr = get_registry().create("mechanism", "krr", ldpsim.Integers(low=0, high=3), eps=1.0)
    with pytest.raises(TypeError, match="TupleMechanism"):
        joint_channel(krr)
    assert mechanism_report(krr).tuples is None


def test_unary_attributes_with_many_bits_are_refused():
    mech = make("rsfd", (11, 2), local="oue-z")
    with pytest.raises(ParameterError, match="11-bit vectors") as info:
        joint_channel(mech)
    assert "grr" in (info.value.hint or "")
    report = tuple_report(mech)
    assert report.identifiability is None and report.privacy is None
    assert report.lines() == [
        "tuples      2 attributes (a0: 11 values, a1: 2 values), 22 tuples; joint channel not enumerated: attribute"
        " 'a0' is reported as 11-bit vectors (2^11 outputs), more than the 2^10 enumerated (give it at most 10"
        " values, or use a local randomizer with k outputs (grr))"
    ]


def test_channels_above_the_size_limit_are_refused(monkeypatch):
    monkeypatch.setattr(diag, "MAX_JOINT_ENTRIES", 35)
    mech = make("spl", (2, 3))  # 6 x 6 = 36 entries
    with pytest.raises(ParameterError, match="6 tuples x 6 outputs, more than the 35 entries"):
        joint_channel(mech)
    lines = mechanism_report(mech).lines()
    assert "joint channel not enumerated" in lines[-1]
    monkeypatch.setattr(diag, "MAX_JOINT_ENTRIES", 17)  # one attribute's 3 reports alone are too many
    with pytest.raises(ParameterError, match="6 tuples x at least 3 outputs, more than the 17 entries"):
        joint_channel(mech)


def test_a_layout_too_large_to_enumerate_is_skipped_for_a_smaller_one(monkeypatch):
    """SMP on 3 x 3: its reports fit (index, value) (9 x 6 entries) but not (value, value) (9 x 9)."""
    monkeypatch.setattr(diag, "MAX_JOINT_ENTRIES", 60)
    smp = make("smp", (3, 3))
    np.testing.assert_allclose(joint_channel(smp), smp_brute(smp), rtol=1e-12)
    with pytest.raises(ParameterError, match="9 tuples x 9 outputs"):  # RS+FD's reports are (value, value)
        joint_channel(make("rsfd", (3, 3)))


# ------------------------------------------------------------------------------ identifiability


@pytest.mark.parametrize("sizes", SIZES)
def test_spl_identifies_the_joint(sizes):
    found = identifiability(make("spl", sizes))
    assert found.identifiable and found.rank == math.prod(sizes) and found.order == len(sizes)
    assert all(ok for _, ok in found.marginals)
    assert str(found).startswith(f"the joint is identifiable (rank {math.prod(sizes)} of {math.prod(sizes)})")


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("smp", {}),
        ("rsfd", {"local": "grr"}),
        ("rsfd", {"local": "oue-z"}),
        ("rsfd", {"local": "oue-r"}),
        ("rsrfd", {"local": "grr", "prior": None}),
    ],
)
@pytest.mark.parametrize("sizes", [(2, 3), (3, 3), (2, 3, 4), (2, 2, 2), (3, 2, 2)])
def test_smp_and_rsfd_identify_exactly_the_one_way_marginals(name, params, sizes):
    if "prior" in params:
        params = {**params, "prior": skewed_prior(sizes)}
    mech = make(name, sizes, **params)
    m = joint_channel(mech)
    found = identifiability(mech, m)
    rank = 1 + sum(k - 1 for k in sizes)  # the functions of x that are sums of one-attribute terms
    assert found.rank == rank == np.linalg.matrix_rank(m) == interaction_dimension(sizes, 1)
    assert not found.identifiable and found.order == 1 and found.exactly_marginals
    assert all(ok == (len(attrs) == 1) for attrs, ok in found.marginals)
    assert found.marginal([0]) and not found.marginal(range(len(sizes)))
    words = str(found)
    assert words.startswith(
        f"the joint is not identifiable (rank {rank} of {math.prod(sizes)}); every 1-way marginal is"
    )
    assert ("no 2-way marginal is" in words) == (len(sizes) == 3)
    assert "identify exactly the 1-way marginals" in words


def test_identifiable_functionals_are_read_off_the_column_space():
    """A channel that reports (x_0, x_1) exactly and nothing of x_2: the a0 x a1 marginal and no other with a2."""
    mech = make("smp", (2, 3, 2))
    m = kron(np.eye(2), np.eye(3), np.ones((2, 1)))
    found = identifiability(mech, m)
    assert found.rank == 6 and found.order == 0
    assert dict(found.marginals) == {(0,): True, (1,): True, (2,): False, (0, 1): True, (0, 2): False, (1, 2): False}
    assert str(found) == (
        "the joint is not identifiable (rank 6 of 12); 1-way marginals: a0 is, a1 is, a2 is not;"
        " 2-way marginals: a0xa1 is, a0xa2 is not, a1xa2 is not"
    )


@pytest.mark.parametrize("shape", [(12, 40), (40, 12), (30, 30)])
def test_the_gram_route_of_the_rank_agrees_with_the_svd(shape):
    rng = np.random.default_rng(7)
    for rank in (1, 5, 11):
        m = rng.random((shape[0], rank)) @ rng.random((rank, shape[1]))
        found, basis = diag._column_space(m)
        u, s, _ = np.linalg.svd(m, full_matrices=False)
        assert found == rank == int((s > diag.RANK_TOL * s[0]).sum())
        # the same column space: the same orthogonal projector
        np.testing.assert_allclose(basis.T @ basis, u[:, :rank] @ u[:, :rank].T, atol=1e-8)


def test_interaction_dimension():
    assert interaction_dimension((2, 3, 4), 0) == 1
    assert interaction_dimension((2, 3, 4), 1) == 1 + 1 + 2 + 3
    assert interaction_dimension((2, 3, 4), 2) == 7 + 1 * 2 + 1 * 3 + 2 * 3
    assert interaction_dimension((2, 3, 4), 3) == 24


# ------------------------------------------------------------------------------------- privacy


def amplified(eps: float, d: int) -> float:
    return math.log(d * (math.exp(eps) - 1) + 1)


def grr_pq(eps: float, k: int) -> tuple[float, float]:
    return math.exp(eps) / (math.exp(eps) + k - 1), 1 / (math.exp(eps) + k - 1)


def brute_levels(mech) -> tuple[float, float, list[float]]:
    """(any pair, pairs differing in every attribute, per attribute: pairs differing only there), pair by pair."""
    log_m = joint_log_channel(mech)
    cells = list(product(*[range(k) for k in mech.domain.sizes]))
    level_all, level_every, per = 0.0, 0.0, [0.0] * len(cells[0])
    for a, x in enumerate(cells):
        for b, y in enumerate(cells):
            if a == b:
                continue
            both = np.isfinite(log_m[a]) | np.isfinite(log_m[b])
            gap = float(np.max(log_m[a][both] - log_m[b][both]))
            differ = [j for j in range(len(x)) if x[j] != y[j]]
            level_all = max(level_all, gap)
            if len(differ) == len(x):
                level_every = max(level_every, gap)
            if len(differ) == 1:
                per[differ[0]] = max(per[differ[0]], gap)
    return level_all, level_every, per


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("spl", {}),
        ("smp", {}),
        ("rsfd", {"local": "grr"}),
        ("rsfd", {"local": "oue-z"}),
        ("rsfd", {"local": "oue-r"}),
        ("rsrfd", {"local": "grr", "prior": None}),
    ],
)
@pytest.mark.parametrize("sizes", [(2, 3), (2, 2, 2), (3, 2, 2)])
def test_levels_equal_a_double_loop_over_pairs(name, params, sizes):
    if "prior" in params:
        params = {**params, "prior": skewed_prior(sizes)}
    mech = make(name, sizes, **params)
    found = tuple_privacy(mech)
    level_all, level_every, per = brute_levels(mech)
    assert found.eps_all == pytest.approx(level_all, abs=1e-12)
    np.testing.assert_allclose(found.per_attribute, per, atol=1e-12)
    # the level over all pairs is reached by tuples that differ in every attribute (docs/tuples-privacy.md)
    assert level_every == pytest.approx(level_all, abs=1e-12)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("sizes", [(2, 3), (3, 3, 3), (2, 3, 4)])
def test_spl_adds_the_attributes_levels(eps, sizes):
    d = len(sizes)
    found = tuple_privacy(make("spl", sizes, eps=eps))
    assert found.eps_all == pytest.approx(eps, abs=1e-9) and found.declared_eps == pytest.approx(eps)
    np.testing.assert_allclose(found.per_attribute, eps / d, atol=1e-9)
    budgets = make("spl", (2, 3), per_attribute=[{"mechanism": "krr", "eps": 0.3}, {"mechanism": "oue", "eps": 0.7}])
    found = tuple_privacy(budgets)
    assert found.eps_all == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(found.per_attribute, [0.3, 0.7], atol=1e-9)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("sizes", [(2, 3), (3, 3, 3), (2, 3, 4)])
def test_smp_is_its_largest_attribute_level(eps, sizes):
    found = tuple_privacy(make("smp", sizes, eps=eps))
    assert found.eps_all == pytest.approx(eps, abs=1e-9) and found.eps_one == pytest.approx(eps, abs=1e-9)
    mixed = tuple_privacy(make("smp", (2, 3), per_attribute=[{"mechanism": "krr", "eps": 0.4}, {"mechanism": "krr"}]))
    assert mixed.eps_all == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(mixed.per_attribute, [0.4, 1.0], atol=1e-9)


def rsfd_grr_one(eps: float, sizes: tuple[int, ...]) -> list[float]:
    """eps_one(j) = ln(1 + (e^eps' - 1) a_j / sum_i a_i), a_i = k_i q_i = k_i / (e^eps' + k_i - 1)."""
    big = math.exp(amplified(eps, len(sizes)))
    a = [k / (big + k - 1) for k in sizes]
    return [math.log1p((big - 1) * a_j / sum(a)) for a_j in a]


def rsfd_oue_r_one(eps: float, sizes: tuple[int, ...]) -> list[float]:
    """e^eps_one(j) = 1 + (r - 1) / (S_j D_j + 1), r = e^eps', D_j = 1 + (r - 1) / k_j and
    S_j = sum_{i != j} 1 / (1 + (r - 1) (k_i - 1) / k_i)."""
    r = math.exp(amplified(eps, len(sizes)))
    out = []
    for j, k in enumerate(sizes):
        s = sum(1 / (1 + (r - 1) * (ki - 1) / ki) for i, ki in enumerate(sizes) if i != j)
        out.append(math.log1p((r - 1) / (s * (1 + (r - 1) / k) + 1)))
    return out


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("sizes", [(3, 3), (4, 4, 4), (2, 3), (2, 3, 4), (4, 2)])
def test_rsfd_grr(eps, sizes):
    d = len(sizes)
    found = tuple_privacy(make("rsfd", sizes, eps=eps))
    assert found.eps_all == pytest.approx(amplified(eps, d), abs=1e-9) == found.declared_eps
    assert found.parameter == eps
    np.testing.assert_allclose(found.per_attribute, rsfd_grr_one(eps, sizes), atol=1e-9)
    if len(set(sizes)) == 1:  # the paper's eps holds exactly between tuples differing in one attribute
        assert found.eps_one == pytest.approx(eps, abs=1e-9)
    else:  # but only with equal domains: the attribute with the most values gets more than eps
        assert found.eps_one > eps + 1e-3
        assert np.argmax(found.per_attribute) == int(np.argmax(sizes))


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("sizes", [(3, 3), (2, 3), (2, 3, 4), (4, 2)])
def test_rsfd_oue_z_keeps_eps_for_one_attribute(eps, sizes):
    found = tuple_privacy(make("rsfd", sizes, eps=eps, local="oue-z"))
    assert found.eps_all == pytest.approx(amplified(eps, len(sizes)), abs=1e-9)
    np.testing.assert_allclose(found.per_attribute, eps, atol=1e-9)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("sizes", [(2, 2), (2, 2, 2), (3, 3), (2, 3), (2, 3, 4)])
def test_rsfd_oue_r_exceeds_eps_with_three_values_or_more(eps, sizes):
    found = tuple_privacy(make("rsfd", sizes, eps=eps, local="oue-r"))
    assert found.eps_all == pytest.approx(amplified(eps, len(sizes)), abs=1e-9)
    np.testing.assert_allclose(found.per_attribute, rsfd_oue_r_one(eps, sizes), atol=1e-9)
    if max(sizes) == 2:
        assert found.eps_one == pytest.approx(eps, abs=1e-9)
    else:
        assert found.eps_one > eps + 1e-3


def rsrfd_grr_one(eps: float, sizes: tuple[int, ...], marginals: list[np.ndarray]) -> list[float]:
    """e^eps_one(j) = (p_j + m_j T_j) / (q_j + m_j T_j), m_j = min pi_j, T_j = sum_{i != j} q_i / max pi_i."""
    e = amplified(eps, len(sizes))
    pq = [grr_pq(e, k) for k in sizes]
    out = []
    for j in range(len(sizes)):
        t = sum(pq[i][1] / marginals[i].max() for i in range(len(sizes)) if i != j)
        low = marginals[j].min()
        out.append(math.log((pq[j][0] + low * t) / (pq[j][1] + low * t)))
    return out


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("sizes", [(2, 3), (3, 3), (2, 3, 4)])
def test_rsrfd_grr_with_a_skewed_prior_exceeds_eps_for_one_attribute(eps, sizes):
    prior = skewed_prior(sizes)
    mech = make("rsrfd", sizes, eps=eps, prior=prior)
    found = tuple_privacy(mech)
    marginals = [mech.domain.marginal(prior, j) for j in range(len(sizes))]
    assert found.eps_all == pytest.approx(amplified(eps, len(sizes)), abs=1e-9)
    np.testing.assert_allclose(found.per_attribute, rsrfd_grr_one(eps, sizes, marginals), atol=1e-9)
    assert found.eps_one > eps + 1e-3  # rare values of the prior: fake data rarely show them


def test_rsrfd_concrete_prior():
    """Two binary attributes, prior marginals (0.9, 0.1) and (0.5, 0.5), eps = 1: a value of prior 0.1 is one that
    fake data seldom show, so a report of it suggests the attribute was sampled."""
    prior = np.outer([0.9, 0.1], [0.5, 0.5]).ravel()
    found = tuple_privacy(make("rsrfd", (2, 2), eps=1.0, prior=prior))
    e = amplified(1.0, 2)  # ln(2e - 1) = 1.48988
    p, q = grr_pq(e, 2)
    first = math.log((p + 0.1 * q / 0.5) / (q + 0.1 * q / 0.5))  # attribute a0: min pi = 0.1, the other's max 0.5
    second = math.log((p + 0.5 * q / 0.9) / (q + 0.5 * q / 0.9))
    np.testing.assert_allclose(found.per_attribute, [first, second], atol=1e-12)
    # both above the paper's eps = 1: a0's rare value, and a1 through a0's common one (it lowers T)
    np.testing.assert_allclose(found.per_attribute, [1.351652, 1.166028], atol=1e-6)
    uniform = tuple_privacy(make("rsrfd", (2, 2), eps=1.0, prior=np.full(4, 0.25)))
    np.testing.assert_allclose(uniform.per_attribute, 1.0, atol=1e-12)  # RS+FD's exact eps


def test_privacy_words():
    found = tuple_privacy(make("rsfd", (3, 3)))
    assert str(found) == (
        "declared 1.48988-LDP (parameter eps = 1): holds; exact eps = 1.48988 between any two tuples,"
        " 1 between tuples differing in one attribute"
    )
    assert found.attribute_line() == "eps between tuples differing only in that attribute: a0 1, a1 1"
    assert tuple_privacy(make("spl", (2, 2))).parameter is None  # the declared level is the parameter


# --------------------------------------------------------------------------- report and command line


def test_mechanism_report_has_the_tuple_section():
    report = mechanism_report(make("smp", (2, 3, 2)))
    assert report.tuples is not None and report.tuples.outputs == 7
    lines = report.lines()
    assert lines[-4:] == [
        "tuples      3 attributes (a0: 2 values, a1: 3 values, a2: 2 values), 12 tuples, 7 outputs enumerated",
        "joint       the joint is not identifiable (rank 5 of 12); every 1-way marginal is; no 2-way marginal is."
        " The reports identify exactly the 1-way marginals (and their combinations): estimate those, not the"
        " joint (the protocol's marginal estimates, or the marginals of an MLE, which every MLE shares)",
        "tuple eps   declared 1-LDP: holds; exact eps = 1 between any two tuples, 1 between tuples differing in"
        " one attribute",
        "per attr    eps between tuples differing only in that attribute: a0 1, a1 1, a2 1",
    ]


def test_parse_domain_reads_products():
    dom = parse_domain("product:age=integers:0..4;sex=categorical:F,M;cell=grid:2x3")
    assert isinstance(dom, Product)
    assert dom.names == ("age", "sex", "cell") and dom.sizes == (5, 2, 6)
    assert dom.labels()[0] == "(0, F, (0,0))"


@pytest.mark.parametrize(
    ("text", "error", "problem", "field"),
    [
        ("product:a=integers:0..2;b", ScenarioError, "'product:a=integers:0..2;b' is not a domain", "--domain"),
        ("product:a=integers:0..2;b=int:0..3", ScenarioError, "is not a domain", "--domain"),
        # the product's own checks, located as parse_domain locates every domain's (integers:5..2: domain.high)
        ("product:a=integers:0..2", ParameterError, "needs at least two attributes", "domain.attributes"),
        ("product:a=integers:0..2;a=categorical:x,y", ParameterError, "'a' is used twice", "domain.attributes.1.name"),
    ],
)
def test_parse_domain_refuses_bad_products(text, error, problem, field):
    with pytest.raises(error, match=problem) as info:
        parse_domain(text)
    assert info.value.field == field


def test_bad_domains_hint_at_products():
    with pytest.raises(ScenarioError) as info:
        parse_domain("product:")
    assert "product:age=integers:0..4;sex=categorical:F,M" in (info.value.hint or "")


def test_check_mechanism_prints_the_tuple_section():
    done = runner.invoke(
        app, ["check", "mechanism", "rsfd", "--domain", "product:a=integers:0..2;b=categorical:x,y", "-p", "eps=1"]
    )
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert "tuples      2 attributes (a: 3 values, b: 2 values), 6 tuples, 6 outputs enumerated" in lines
    assert any(line.startswith("joint       the joint is not identifiable (rank 4 of 6)") for line in lines)
    assert any(line.startswith("tuple eps   declared 1.48988-LDP (parameter eps = 1): holds") for line in lines)
    assert "per attr    eps between tuples differing only in that attribute: a 1.0718, b 0.922645" in lines


def test_check_mechanism_says_why_a_channel_is_not_enumerated():
    done = runner.invoke(
        app,
        ["check", "mechanism", "rsfd", "-d", "product:a=integers:0..10;b=categorical:x,y", "-p", "eps=1", "-p",
         "local=oue-z"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "joint channel not enumerated: attribute 'a' is reported as 11-bit vectors" in done.stdout

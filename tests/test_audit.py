"""The audit of privacy claims from draws, and the Bayes vulnerability."""

from __future__ import annotations

import math

import numpy as np
import plugins_under_test
import pytest
from helpers import make
from plugins_under_test import BiasedKRR, DoublyPerturbedOUE, OverclaimingKRR
from typer.testing import CliRunner

import ldpsim
from ldpsim import Categorical, Grid, Integers, ParameterError, Privacy, audit_mechanism, bayes_vulnerability
from ldpsim.output.cli import app
from ldpsim.theory.audit import AuditPath, audit_paths, sampler_draws
from ldpsim.theory.audit_stats import reachable_bound

runner = CliRunner()
FOUR = Integers(low=0, high=3)
#: one small case per built-in mechanism; the test below fails when a new built-in has none
PAIRS = ldpsim.Product(
    attributes=[
        {"name": "a", "kind": "integers", "low": 0, "high": 1},
        {"name": "b", "kind": "integers", "low": 0, "high": 1},
    ]
)
BUILT_IN = [
    ("krr", FOUR, {"eps": 1.0}),
    ("geometric", FOUR, {"eps": 0.5}),
    ("laplace", FOUR, {"eps": 0.5}),
    ("exponential", Categorical(values=["a", "b", "c"]), {"eps": 1.0}),
    ("planar-geometric", Grid(rows=2, cols=2), {"eps": 1.0}),
    ("planar-laplace", Grid(rows=2, cols=2), {"eps": 1.0}),
    ("rappor", FOUR, {"eps": 1.0}),
    ("oue", FOUR, {"eps": 1.0}),
    ("olh", FOUR, {"eps": 1.0}),
    ("adp", FOUR, {"eps": 1.0}),
    ("hadamard", FOUR, {"eps": 1.0}),
    ("subset_selection", FOUR, {"eps": 1.0}),
    ("duchi", FOUR, {"eps": 1.0}),
    ("piecewise", FOUR, {"eps": 1.0}),
    ("hybrid", FOUR, {"eps": 1.0}),
    ("square_wave", FOUR, {"eps": 1.0}),
    ("spl", PAIRS, {"eps": 1.0}),
    ("smp", PAIRS, {"eps": 1.0}),
    ("rsfd", PAIRS, {"eps": 1.0}),
    ("rsrfd", PAIRS, {"eps": 1.0, "prior": [0.25, 0.25, 0.25, 0.25]}),
    ("duchi-md", PAIRS, {"eps": 1.0}),
    ("pm-sampling", PAIRS, {"eps": 1.0}),
    ("hm-sampling", PAIRS, {"eps": 1.0}),
    ("blh", FOUR, {"eps": 1.0}),
    ("flh", FOUR, {"eps": 1.0, "hashes": 20}),
    ("hcms", FOUR, {"eps": 1.0, "hashes": 8, "buckets": 8}),
    ("cms", FOUR, {"eps": 1.0, "hashes": 8, "buckets": 8}),
    ("the", FOUR, {"eps": 1.0}),
    ("she", FOUR, {"eps": 1.0}),
    ("matrix", Categorical(values=["a", "b"]), {"rows": [[0.6, 0.4], [0.3, 0.7]]}),
    ("lip", FOUR, {"eps": 2.0, "prior": [0.2, 0.3, 0.25, 0.25]}),
    ("lip-binary", Integers(low=0, high=1), {"eps": 1.0, "prior": [0.4, 0.6]}),
    ("memoized", FOUR, {"eps_permanent": 2.0, "eps_instantaneous": 1.5, "rounds": 2}),
    ("l-grr", FOUR, {"eps_inf": 2.0, "eps_1": 1.0, "rounds": 2}),
    ("l-sue", FOUR, {"eps_inf": 2.0, "eps_1": 1.0, "rounds": 2}),
    ("l-oue", FOUR, {"eps_inf": 2.0, "eps_1": 1.0, "rounds": 2}),
    ("l-osue", FOUR, {"eps_inf": 2.0, "eps_1": 1.0, "rounds": 2}),
    ("l-soue", FOUR, {"eps_inf": 2.0, "eps_1": 1.0, "rounds": 2}),
    ("loloha", FOUR, {"eps_inf": 2.0, "eps_1": 1.0, "rounds": 2}),
    ("rappor-deployed", FOUR, {"bits": 8, "hashes": 2, "cohorts": 2, "f": 0.5, "p": 0.25, "q": 0.75, "rounds": 2}),
    ("dbitflip", FOUR, {"eps": 1.0, "d": 2, "rounds": 2}),
    ("hh", FOUR, {"eps": 1.0, "branching": 2}),
    ("haar-hrr", FOUR, {"eps": 1.0}),
]


def true_level(eps: float) -> float:
    """The LDP level of OUE whose true bit is 1 w.p. p + (1 - p) q (p = 1/2, q = 1/(1+e^eps))."""
    q = 1 / (1 + math.exp(eps))
    p = 0.5 + 0.5 * q
    return math.log(p / q * (1 - q) / (1 - p))


@pytest.mark.parametrize("eps", [0.5, 1.0])
def test_a_doubly_perturbed_oue_sampler_is_caught_at_a_million_draws(eps):
    report = audit_mechanism(DoublyPerturbedOUE(Integers(low=0, high=2), eps=eps), draws=10**6)
    sampler, counts = report.paths
    assert report.exceeded and sampler.path == "sampler"
    assert eps < sampler.bound <= true_level(eps)  # 1.29 (0.5), 1.55 (1): caught, and still a lower bound
    assert sampler.bound > 0.95 * true_level(eps)  # the likelihood-ratio event is the telling one
    assert counts.bound <= eps  # the count path draws from the (right) matrix


def test_a_sampler_a_little_biased_and_a_claim_too_small_are_caught():
    assert audit_mechanism(BiasedKRR(FOUR, eps=1.0), draws=10**6).paths[0].bound > 1.0
    overclaim = audit_mechanism(OverclaimingKRR(FOUR, eps=1.0), draws=10**5)
    assert all(0.5 < p.bound <= 1.0 for p in overclaim.paths)  # both paths: the claim, not the code, is wrong


def test_a_geo_claim_is_audited_per_unit_distance():
    geometric = ldpsim.get_registry().get("mechanism", "geometric").cls

    class HalfClaim(geometric):
        name = "half-claim"

        @property
        def privacy(self):
            return Privacy("geo", self.eps / 2)

    line = Integers(low=0, high=5)
    honest = audit_mechanism(make("mechanism", "geometric", line, eps=0.4), draws=10**5)
    assert not honest.exceeded and 0.35 < honest.bound <= 0.4
    x, y = honest.paths[0].pair
    assert abs(x - y) > 1  # the telling pair is not the nearest: its bound per unit distance is tighter
    assert audit_mechanism(HalfClaim(line, eps=0.4), draws=10**5).exceeded


@pytest.mark.parametrize("name", ["krr", "oue"])
def test_a_correct_mechanism_passes_with_a_bound_near_its_eps(name):
    report = audit_mechanism(make("mechanism", name, Integers(low=0, high=4), eps=1.0), draws=10**5)
    assert [p.path for p in report.paths] == ["sampler", "counts"]
    assert not report.exceeded
    assert all(0.9 < p.bound <= 1.0 for p in report.paths)


def test_every_built_in_mechanism_passes(registry):
    assert {name for name, _, _ in BUILT_IN} == set(registry.names("mechanism"))
    for name, domain, params in BUILT_IN:
        mech = make("mechanism", name, domain, **params)
        report = audit_mechanism(mech, draws=20_000, seed=1)
        assert not report.exceeded, "\n".join(report.lines())
        if mech.privacy.notion == "lip":
            assert report.skipped and not report.paths
        else:
            assert report.skipped is None and report.bound > 0.3 * report.declared, "\n".join(report.lines())


def test_the_bound_is_a_lower_bound_in_repeated_experiments():
    # 200 audits of 2-value k-RR at eps = 1, its true level, at 80 % confidence: the bound may exceed eps
    # in at most 20 % of them. Clopper-Pearson is conservative: these seeds give 6 (3 %), 2000 others
    # 4.4 %; at the default 95 % confidence these seeds give 1 (0.5 %).
    krr = make("mechanism", "krr", Integers(low=0, high=1), eps=1.0)
    path = [AuditPath("sampler", "per user", sampler_draws)]
    bounds = np.array([audit_paths(krr, path, draws=3000, seed=s, confidence=0.8).bound for s in range(200)])
    assert (bounds > 1.0).sum() <= 20  # half the rate allowed: a binomial tail below 1e-4 at the true rate
    assert bounds.mean() > 0.9  # and not vacuous
    point = np.array([audit_paths(krr, path, draws=3000, seed=s, confidence=0.01).bound for s in range(40)])
    assert (point > 1.0).mean() > 0.3  # near-point estimates straddle eps: the count above can fail


def test_the_draws_behind_a_report_come_from_its_seed():
    krr = make("mechanism", "krr", FOUR, eps=1.0)
    assert (
        audit_mechanism(krr, draws=5000, seed=3).paths[0].hits == audit_mechanism(krr, draws=5000, seed=3).paths[0].hits
    )
    assert (
        audit_mechanism(krr, draws=5000, seed=3).paths[0].hits != audit_mechanism(krr, draws=5000, seed=4).paths[0].hits
    )


def test_too_few_draws_are_refused_with_the_number_needed():
    krr = make("mechanism", "krr", FOUR, eps=1.0)
    with pytest.raises(ParameterError, match=r"^draws: 100 draws per value can show at most eps >= 0\.48") as refusal:
        audit_mechanism(krr, draws=100)
    needed = int(refusal.value.hint.removeprefix("use at least ").removesuffix(" draws"))
    alpha = 0.05 / 4  # two paths, two one-sided bounds each
    assert reachable_bound(1.0, needed, alpha) >= 0.5 > reachable_bound(1.0, needed - needed // 10, alpha)
    audit_mechanism(krr, draws=needed)
    with pytest.raises(ParameterError, match="no feasible number of draws"):
        audit_mechanism(make("mechanism", "krr", FOUR, eps=200.0), draws=10**6)


def test_a_large_domain_is_audited_on_pairs_of_64_values_spread_over_it():
    krr = make("mechanism", "krr", Integers(low=0, high=199), eps=2.0)
    report = audit_mechanism(krr, draws=4000)
    assert "pairs among 64 of the 200 values, spread evenly over the domain" in report.lines()
    assert set(audit_mechanism(krr, draws=4000, values=[7, 150]).paths[0].pair) == {7, 150}
    with pytest.raises(ParameterError, match=r"^values: needs at least two domain indices in 0\.\.199"):
        audit_mechanism(krr, draws=4000, values=[3, 200])


def test_what_is_not_audited_says_why():
    lip = make("mechanism", "lip", FOUR, eps=2.0, prior=[0.25] * 4)
    assert "LIP guarantee holds under a prior" in audit_mechanism(lip, draws=10).skipped
    exposed = make("mechanism", "matrix", Categorical(values=["a", "b"]), rows=[[1, 0], [0.5, 0.5]])
    assert "eps = inf" in audit_mechanism(exposed, draws=10).skipped


# ------------------------------------------------------------------------------------------ CLI
@pytest.fixture
def with_broken(monkeypatch):
    registry = ldpsim.Registry.from_entry_points()
    registry.add(plugins_under_test, name="under-test")
    monkeypatch.setattr(ldpsim.plugin.registry, "_default", registry)


def test_the_cli_passes_a_correct_mechanism():
    done = runner.invoke(app, ["audit", "krr", "-d", "integers:0..4", "-p", "eps=1", "--draws", "20000"])
    assert done.exit_code == 0, done.output
    assert "the empirical lower bound" in done.stdout and "is within the declared eps = 1" in done.stdout
    assert "Bayes vulnerability (uniform prior): 0.4046" in done.stdout  # e / (e + 4)


def test_the_cli_fails_a_sampler_less_private_than_declared_in_one_line(with_broken):
    done = runner.invoke(app, ["audit", "doubly-perturbed-oue", "-d", "integers:0..2", "-p", "eps=1", "-n", "100000"])
    assert done.exit_code == 1
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("audit failed: the sampler draws show eps >= 1.5")
    assert done.stderr.rstrip().endswith("above the declared 1-LDP")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-n", "100"], "error: --draws: 100 draws per value can show at most"),
        (["-n", "0"], "error: --draws: must be a positive integer"),
        (["--confidence", "1.5"], "error: --confidence: must be between 0 and 1"),
        (["--prior", "0.5,0.5"], "error: --prior: needs 5 non-negative numbers"),
        (["-p", "eps=-1"], "error: --param eps:"),
    ],
)
def test_the_cli_refuses_bad_input_in_one_line(args, message):
    done = runner.invoke(app, ["audit", "krr", "-d", "integers:0..4", "-p", "eps=1", *args])
    assert done.exit_code == 2
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1, done.stderr


# ------------------------------------------------------------------------------- vulnerability
@pytest.mark.parametrize(("k", "eps"), [(2, 0.5), (5, 1.0), (50, 3.0)])
def test_the_bayes_vulnerability_of_krr_is_e_eps_over_e_eps_plus_k_minus_1(k, eps):
    krr = make("mechanism", "krr", Integers(low=0, high=k - 1), eps=eps)
    assert bayes_vulnerability(krr) == pytest.approx(math.exp(eps) / (math.exp(eps) + k - 1), rel=1e-12)


def oue_vulnerability(k: int, eps: float) -> float:
    """(1/k) sum_y max_x P(y|x): a report with a set bit is best explained by a value whose bit is set."""
    p, q = 0.5, 1 / (1 + math.exp(eps))
    return (p / q * (1 - (1 - q) ** k) + (1 - p) * (1 - q) ** (k - 1)) / k


def test_the_bayes_vulnerability_of_oue_exact_and_sampled():
    small = make("mechanism", "oue", Integers(low=0, high=7), eps=1.0)  # has a matrix: exact
    assert bayes_vulnerability(small) == pytest.approx(oue_vulnerability(8, 1.0), rel=1e-12)
    large = make("mechanism", "oue", Integers(low=0, high=39), eps=1.0)  # no matrix: Monte Carlo
    assert bayes_vulnerability(large, samples=40_000) == pytest.approx(oue_vulnerability(40, 1.0), abs=4 * 0.5 / 200)


def test_the_bayes_vulnerability_is_within_e_eps_times_the_prior_s():
    prior = np.array([0.35, 0.25, 0.2, 0.2])
    for mech in (
        make("mechanism", "lip", FOUR, eps=1.5, prior=prior.tolist()),
        make("mechanism", "krr", FOUR, eps=1.5),
        make("mechanism", "olh", FOUR, eps=1.5),
    ):
        v = bayes_vulnerability(mech, prior, samples=20_000)
        assert prior.max() <= v <= math.exp(1.5) * prior.max()
    lip = make("mechanism", "lip", FOUR, eps=1.5, prior=prior.tolist())
    report = audit_mechanism(lip, draws=10)
    assert report.prior_name == "the LIP claim's" and report.vulnerability == bayes_vulnerability(lip, prior)

"""Poisoning: attacker cohorts, the attacks of Cao, Jia & Gong (2021), their gains, and the defences."""

from __future__ import annotations

import math

import numpy as np
import pytest
from typer.testing import CliRunner

import ldpsim
from ldpsim.output.cli import app
from ldpsim.running.tasks import simulate, tasks

runner = CliRunner()
K = 12
TARGETS = [2, 7, 11]


def scenario(mech: dict, attack: dict, beta: float = 0.1, users: int = 20_000, reps: int = 1, **extra) -> dict:
    doc = {
        "name": "poisoning-test",
        "seed": 7,
        "users": users,
        "repetitions": reps,
        "domain": {"kind": "integers", "low": 0, "high": K - 1},
        "dataset": {"name": "zipf", "s": 1.0},
        "cohorts": {
            "everyone": {"share": "rest", "reports": [mech]},
            "attackers": {"share": beta, "attack": attack},
        },
        "estimators": ["inv-p"],
        "metrics": ["gain", "tv"],
    }
    doc.update(extra)
    return doc


def closed_form(mech: str, attack: str, eps: float, beta: float, f_t: float, r: int, d: int) -> float:
    """The expected gain of the unbiased estimate: Cao et al.'s Theorems (MGA as printed in the issue)."""
    e = math.exp(eps)
    if attack == "ria":  # every oracle: a target reported honestly raises the targets by 1 in expectation
        return beta * (1 - f_t)
    if mech == "krr":
        return {"mga": beta * (1 - f_t) + beta * (d - r) / (e - 1), "rpa": beta * (r / d - f_t)}[attack]
    if attack == "mga":  # OUE, and OLH with g = e^eps + 1 exactly
        return beta * (2 * r * e / (e - 1) - f_t)
    return {"oue": beta * (r - f_t), "olh": -beta * f_t}[mech]  # RPA: a uniform bit vector; a uniform (a, b, y)


# OLH at eps = ln 3 has g = e^eps + 1 = 4 buckets exactly, the paper's setting
MECHS = {"krr": 1.0, "oue": 1.0, "olh": math.log(3.0)}


@pytest.mark.parametrize("attack", ["mga", "ria", "rpa"])
@pytest.mark.parametrize("mech", list(MECHS))
def test_simulated_gains_match_the_closed_forms(mech, attack):
    eps = MECHS[mech]
    # 200 hashes leave a fake user without a hash colliding all 3 targets in 4 buckets w.p. (15/16)^200 < 3e-6
    spec = {"name": attack, "targets": TARGETS, **({"hashes": 200} if attack == "mga" else {})}
    sc = ldpsim.load_scenario(scenario({"mechanism": mech, "eps": eps}, spec, users=5000, reps=20))
    diffs = []
    for task in tasks(sc):
        setup, truth, obs = simulate(task)
        fake = sum(c.users for c in setup.cohorts if c.attack is not None)
        beta = fake / setup.users
        gain = float(np.sum(ldpsim.unbiased_estimate(obs)[TARGETS] - truth[TARGETS]))
        diffs.append(gain - closed_form(mech, attack, eps, beta, float(truth[TARGETS].sum()), len(TARGETS), K))
    diffs = np.asarray(diffs)
    # The unbiased estimate is unbiased given the users' values, so each difference has mean 0. A t-test over
    # 20 seeded runs at |t| < 4.5 alarms falsely with probability 2e-4 per case (Student t, 19 df): 2e-3 for all 9.
    t = diffs.mean() / (diffs.std(ddof=1) / math.sqrt(diffs.size))
    assert abs(t) < 4.5, (diffs.mean(), diffs.std(ddof=1))


def test_a_wrong_closed_form_is_caught():
    """The test above can fail: k-RR's MGA gain without its amplification term is rejected."""
    sc = ldpsim.load_scenario(scenario({"mechanism": "krr", "eps": 1.0}, {"name": "mga", "targets": TARGETS}, reps=5))
    for task in tasks(sc):
        setup, truth, obs = simulate(task)
        gain = float(np.sum(ldpsim.unbiased_estimate(obs)[TARGETS] - truth[TARGETS]))
        beta = sum(c.users for c in setup.cohorts if c.attack is not None) / setup.users
        assert gain > beta * (1 - truth[TARGETS].sum()) + 0.3  # the amplification beta (d - r)/(e - 1) is 0.52


def test_attack_reports_have_the_papers_form():
    domain = ldpsim.make_domain({"kind": "integers", "low": 0, "high": K - 1})
    reg = ldpsim.get_registry()
    rng = np.random.default_rng(1)
    mga = reg.create("attack", "mga", domain, targets=TARGETS, hashes=300)
    krr = reg.create("mechanism", "krr", domain, eps=1.0)
    reports, counts = mga.sample(krr, 3000, rng)
    assert sorted(reports[:, 0]) == TARGETS and counts.sum() == 3000 and counts.min() > 800  # uniform on targets
    oue = reg.create("mechanism", "oue", domain, eps=1.0)
    reports, counts = mga.sample(oue, 500, rng)
    bits = oue.unpack_bits(reports)
    extra = round(oue.p + (K - 1) * oue.q - len(TARGETS))  # the paper's l other bits
    assert bits[:, TARGETS].all() and (bits.sum(axis=1) == len(TARGETS) + extra).all()
    olh = reg.create("mechanism", "olh", domain, eps=math.log(3.0))
    reports, counts = mga.sample(olh, 200, rng)
    # judged by the mechanism's own likelihood: every target at the high level (hashed to the reported bucket)
    logl = olh.log_likelihood(reports)
    high = logl.max(axis=1, keepdims=True)
    assert np.isclose(logl[:, TARGETS], high).all() and counts.sum() == 200


def test_honest_results_are_unchanged_by_an_empty_attacker_cohort():
    honest = scenario({"mechanism": "krr", "eps": 1.0}, {"name": "mga", "r": 3}, beta=0.0, reps=2)
    plain = {**honest, "cohorts": {"everyone": {"share": 1, "reports": [{"mechanism": "krr", "eps": 1.0}]}}}
    plain["metrics"] = ["tv"]
    for with_attackers, without in zip(
        tasks(ldpsim.load_scenario(honest)), tasks(ldpsim.load_scenario(plain)), strict=True
    ):
        _, truth_a, obs_a = simulate(with_attackers)
        _, truth_b, obs_b = simulate(without)
        assert np.array_equal(truth_a, truth_b)
        assert np.array_equal(obs_a.groups[0].reports, obs_b.groups[0].reports)
        assert np.array_equal(obs_a.groups[0].counts, obs_b.groups[0].counts)


def test_gain_metric_and_honest_truth_in_a_run():
    doc = scenario({"mechanism": "oue", "eps": 1.0}, {"name": "mga", "targets": TARGETS}, users=5000, reps=2)
    ds = ldpsim.run_scenario(doc)
    gain = ds["gain"].sel(estimator="inv-p").values
    assert (gain > 0.5).all()  # beta (2 r e / (e - 1) - f_T) is ~0.9 before the projection
    assert np.allclose(ds["truth"].sum("value"), 1.0)  # the honest users' distribution


def test_contamination_mle_removes_the_gain_and_estimates_beta():
    doc = scenario({"mechanism": "oue", "eps": 1.0}, {"name": "mga", "targets": TARGETS}, reps=2)
    doc["estimators"] = {
        "ibu": {},
        "contamination-mle": {"r": 3},
        "known": {"name": "contamination-mle", "r": 3, "beta": 0.1},
        "cao-norm": {},
    }
    ds = ldpsim.run_scenario(doc)
    gain = ds["gain"].mean("rep")
    assert float(gain.sel(estimator="ibu")) > 0.4
    assert abs(float(gain.sel(estimator="contamination-mle"))) < 0.05
    assert abs(float(gain.sel(estimator="known"))) < 0.05
    assert np.allclose(ds["contamination"].sel(estimator="known"), 0.1)  # beta known: kept fixed
    assert np.allclose(ds["contamination"].sel(estimator="contamination-mle"), 0.1, atol=0.02)
    clean = ldpsim.run_scenario(
        {**doc, "cohorts": {"everyone": doc["cohorts"]["everyone"] | {"share": 1}}, "metrics": ["tv"]}
    )
    lr_clean = float(clean["poisoning_lr"].sel(estimator="contamination-mle").max())
    assert float(ds["poisoning_lr"].sel(estimator="contamination-mle").min()) > 10 * max(lr_clean, 1.0)


def test_frequent_itemset_finds_planted_targets():
    from ldpsim_plugins.estimators.contamination import frequent_itemset

    rng = np.random.default_rng(3)
    honest = rng.random((5000, 20)) < 0.3
    fake = rng.random((500, 20)) < 0.3
    fake[:, [4, 9, 15]] = True
    supports = np.vstack([honest, fake])
    assert frequent_itemset(supports, np.ones(5500), 3).tolist() == [4, 9, 15]


def test_cao_norm_is_min_shift_then_rescale():
    from ldpsim_plugins.estimators.contamination import cao_norm

    assert np.allclose(cao_norm(np.array([0.5, -0.1, 0.6])), [0.6 / 1.3, 0.0, 0.7 / 1.3])


class EveryoneSaysZero(ldpsim.Attack):
    """A third party's attack: every fake user reports output 0 of a k-RR-like matrix mechanism."""

    name = "say-zero"

    def _applies_to(self, mechanism):
        return None if mechanism.report_width == 1 and mechanism.matrix is not None else "needs a matrix"

    def _sample(self, mechanism, m, rng):
        return np.zeros((1, 1), dtype=np.int64), np.array([m])


def test_a_third_party_attack_registers_and_runs():
    with ldpsim.registered(EveryoneSaysZero):
        ds = ldpsim.run_scenario(scenario({"mechanism": "krr", "eps": 2.0}, {"name": "say-zero", "targets": [0]}))
    assert float(ds["gain"].sel(estimator="inv-p").mean()) > 0.05
    listing = runner.invoke(app, ["list", "attacks"]).stdout
    assert "mga" in listing and "ria" in listing and "rpa" in listing


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"beta": 1.0}, "the fake users' share must be in [0, 1)"),
        ({"attack": {"name": "mga", "targets": [3, 40]}}, "distinct domain indices in 0..11"),
        ({"mech": {"mechanism": "cms", "eps": 1.0}}, "attack 'mga' does not apply to cms"),
        ({"attack": {"name": "mga"}}, "needs its targets"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, change, message):
    mech = change.get("mech", {"mechanism": "krr", "eps": 1.0})
    doc = scenario(mech, change.get("attack", {"name": "mga", "r": 3}), beta=change.get("beta", 0.1), users=1000)
    path = tmp_path / "bad.toml"
    path.write_text(_toml(doc))
    result = runner.invoke(app, ["run", str(path), "-o", str(tmp_path / "out.nc")])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and message in errors[0], result.stderr


def test_contamination_mle_refuses_krr():
    doc = scenario({"mechanism": "krr", "eps": 1.0}, {"name": "mga", "r": 3}, users=1000)
    doc["estimators"] = ["contamination-mle"]
    with pytest.raises(ldpsim.LdpsimError, match="unary encoding"):
        ldpsim.load_scenario(doc)


def _toml(doc: dict) -> str:
    """A scenario document as TOML (the few shapes these tests write)."""

    def value(v):
        if isinstance(v, str):
            return f'"{v}"'
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f'"{k}" = {value(x)}' for k, x in v.items()) + " }"
        return repr(v)

    lines = [f"{k} = {value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for key, table in doc.items():
        if isinstance(table, dict):
            lines.append(f"[{key}]")
            lines.extend(f'"{k}" = {value(v)}' for k, v in table.items())
    return "\n".join(lines) + "\n"


def test_fake_reports_join_the_attacked_cohorts_group_with_its_prior():
    """Fake users pose as the attacked cohort: one group of reports, with that cohort's known local prior."""
    doc = scenario({"mechanism": "krr", "eps": 1.0}, {"name": "ria", "targets": [0]}, users=2000)
    doc["cohorts"]["everyone"]["dataset"] = {"name": "pmf", "p": [0.5] + [0.5 / (K - 1)] * (K - 1)}
    setup, truth, obs = simulate(tasks(ldpsim.load_scenario(doc))[0])
    assert len(obs.groups) == 1 and obs.groups[0].prior is not None and obs.n == setup.users
    assert truth.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("name", ["krr", "geometric", "hadamard"])
def test_mga_on_a_matrix_mechanism_sends_the_reports_of_largest_gain(name):
    """Brute force through the estimation code: one report z alone has the unbiased estimate u_z; MGA's
    outputs are those maximising sum_t u_z[t]."""
    domain = ldpsim.make_domain({"kind": "integers", "low": 0, "high": K - 1})
    reg = ldpsim.get_registry()
    mech = reg.create("mechanism", name, domain, eps=1.0)
    gains = []
    for z in range(mech.output_size):
        alone = ldpsim.Observations(domain, [ldpsim.ReportGroup((mech,), np.array([[z]]), np.array([1]))])
        gains.append(ldpsim.unbiased_estimate(alone)[TARGETS].sum())
    best = np.flatnonzero(np.isclose(gains, max(gains), rtol=1e-9, atol=1e-12))
    mga = reg.create("attack", "mga", domain, targets=TARGETS)
    assert mga.best_outputs(mech).tolist() == best.tolist()

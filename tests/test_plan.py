"""The planner: closed forms, agreement of analytic and simulated answers, unreachable targets, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr
from scipy.stats import norm
from typer.testing import CliRunner

import ldpsim
from ldpsim import LdpsimError
from ldpsim.output.cli import app
from ldpsim.running.plan import plan

runner = CliRunner()


def krr_variance(k: int, eps: float) -> float:
    """Per-user variance of one coordinate of k-RR's inversion estimate, uniform values: lambda (1-lambda) / (p-q)^2."""
    p, q = math.exp(eps) / (k - 1 + math.exp(eps)), 1 / (k - 1 + math.exp(eps))
    lam = 1 / k
    return lam * (1 - lam) / (p - q) ** 2


def test_users_for_a_half_width_is_the_closed_form():
    """k-RR, eps = 1, k = 100, INV: n = (z / 0.01)^2 times the per-user variance of a coordinate."""
    answer = plan("krr", "integers:0..99", eps=1.0, target=0.01, error="halfwidth", estimator="inv-p")
    z = norm.ppf(0.975)
    exact = (z / 0.01) ** 2 * krr_variance(100, 1.0)
    assert answer.method == "analytic" and answer.se == 0
    assert answer.answer == math.ceil(exact)
    assert answer.answer == pytest.approx((1.96 / 0.01) ** 2 * krr_variance(100, 1.0), rel=1e-4)  # z ~ 1.96
    # the half-width is below the target at the answer and above it one user earlier
    at = plan("krr", "integers:0..99", eps=1.0, users=int(answer.answer), error="halfwidth")
    before = plan("krr", "integers:0..99", eps=1.0, users=int(answer.answer) - 1, error="halfwidth")
    assert at.answer <= 0.01 < before.answer


def test_eps_for_a_half_width_inverts_the_users_question():
    """The eps found for a target at n gives, asked back, about n users for that target."""
    found = plan("krr", "integers:0..19", users=50_000, target=0.02, error="halfwidth")
    assert found.method == "analytic" and found.question == "eps"
    back = plan("krr", "integers:0..19", eps=found.answer, target=0.02, error="halfwidth")
    assert back.answer == pytest.approx(50_000, rel=1e-4)


def test_analytic_l2_is_the_trace_over_n():
    """RMS L2 of k-RR's inversion against the users' values: sum_x (Var v_x - theta_x (1 - theta_x)) / n."""
    k, eps, n = 10, 1.0, 10_000
    answer = plan("krr", f"integers:0..{k - 1}", eps=eps, users=n, error="l2", method="analytic")
    per_user = k * (krr_variance(k, eps) - (1 / k) * (1 - 1 / k))
    assert answer.answer == pytest.approx(math.sqrt(per_user / n), rel=1e-9)


@pytest.mark.parametrize("error", ["l2", "tv", "halfwidth"])
def test_analytic_and_simulated_errors_agree(error):
    """k = 5, eps = 2, n = 20 000: INV-P equals the unbiased estimate (no coordinate near 0), so its simulated
    error must match the formula within 4 Monte-Carlo standard errors (false alarm 6e-5 per case for a
    normal mean; TV's formula is a normal approximation). The simulated half-width is the widest of the
    intervals the estimator states, which plug in the estimate: the largest of 5 noisy standard errors,
    above the formula's by 0.7 % here, hence 1 % more for it."""
    common = dict(eps=2.0, users=20_000, error=error, estimator="inv-p", repetitions=200, seed=3)
    exact = plan("krr", "integers:0..4", method="analytic", **common)
    simulated = plan("krr", "integers:0..4", method="simulation", **common)
    assert exact.method == "analytic" and simulated.method == "simulation"
    slack = 0.01 * exact.answer if error == "halfwidth" else 0.0
    assert abs(simulated.answer - exact.answer) <= 4 * simulated.se + slack, (simulated.answer, simulated.se)


def test_simulated_users_agree_with_the_closed_form():
    """The users a simulation search finds for an RMS L2 error are the closed form's within 4 stated se
    (INV-P is the unbiased estimate there: k = 20, eps = 2, every coordinate 20 sd away from 0)."""
    common = dict(eps=2.0, target=0.01, error="l2", estimator="inv-p")
    exact = plan("krr", "integers:0..19", method="analytic", **common)
    found = plan("krr", "integers:0..19", method="simulation", repetitions=100, seed=1, **common)
    assert found.method == "simulation" and 0 < found.se < 0.05 * found.answer
    assert abs(found.answer - exact.answer) <= 4 * found.se, (found.answer, found.se, exact.answer)
    assert np.all(np.diff(found.curve.smoothed) <= 0)  # the fit falls as n grows
    assert np.all(np.diff(found.curve.points) > 0)


def test_simulated_eps_agrees_with_the_analytic_eps():
    """The eps a simulation search finds at 150 000 users for RMS L2 0.01 is the analytic one within 4 stated se."""
    common = dict(users=150_000, target=0.01, error="l2", estimator="inv-p")
    exact = plan("krr", "integers:0..19", method="analytic", **common)
    found = plan("krr", "integers:0..19", method="simulation", repetitions=50, seed=2, **common)
    assert found.question == "eps" and 0 < found.se < 0.05 * found.answer
    assert abs(found.answer - exact.answer) <= 4 * found.se, (found.answer, found.se, exact.answer)


def test_stated_monte_carlo_error_is_calibrated():
    """Over 20 seeds, (answer - closed form) / stated se has sd within [0.5, 1.6] (chi-square with 19 df: each
    bound has a false-alarm rate near 2e-4 if the stated se is right) and mean within 4 / sqrt(20)."""
    common = dict(eps=2.0, target=0.01, error="l2", estimator="inv-p")
    exact = plan("krr", "integers:0..19", method="analytic", **common).answer
    z = []
    for seed in range(20):
        found = plan("krr", "integers:0..19", method="simulation", repetitions=20, seed=100 + seed, **common)
        z.append((found.answer - exact) / found.se)
    assert 0.5 <= np.std(z, ddof=1) <= 1.6, z
    assert abs(np.mean(z)) <= 4 / math.sqrt(20), z


def test_mle_users_by_simulation():
    """IBU has no formula: the answer is simulated, its curve brackets the target."""
    found = plan("krr", "integers:0..9", eps=1.0, target=0.05, estimator="ibu", repetitions=10)
    assert found.method == "simulation" and found.se > 0
    c = found.curve
    assert c.smoothed.max() > 0.05 >= c.smoothed.min()
    assert c.points.min() < found.answer <= c.points.max()


def test_unreachable_target_names_the_limiting_error():
    # 100 users: the half-width is at least z sqrt(theta (1 - theta) / n) = 0.0195 however large eps is
    with pytest.raises(LdpsimError, match=r"no eps up to 30 .* the error is still 0\.0195") as caught:
        plan("krr", "integers:0..99", users=100, target=0.001, error="halfwidth")
    assert caught.value.field == "target"
    # one EM step from the uniform start never gets closer than its own limit, whatever n
    with pytest.raises(LdpsimError, match=r"no number of users up to 1e\+09 reaches TV 0\.01: the error is still 0\.4"):
        plan(
            "krr",
            "integers:0..9",
            eps=1.0,
            target=0.01,
            estimator="ibu",
            estimator_params={"max_iter": 1},
            dataset="binomial",
            dataset_params={"p": 0.3},
            repetitions=3,
        )


def one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--eps", "1", "--target", "0"], "--target: must be a number > 0"),
        (["--eps", "1"], "--target: needs exactly two of eps, users and target"),
        (["--eps", "1", "--users", "10", "--target", "0.1"], "needs exactly two"),
        (["--eps", "1", "--target", "0.1", "--error", "mse"], "--error: unknown error 'mse'"),
        (["--eps", "1", "--target", "0.1", "--error", "halfwidth", "--level", "1.5"], "--level: must be in (0, 1)"),
        (["--eps", "1", "--target", "0.1", "--param", "k=3"], "--param k:"),
        (["--eps", "-1", "--target", "0.1"], "--eps: must be a number > 0"),
        (["--users", "0", "--eps", "1"], "--users: must be an integer"),
        (["--eps", "1", "--target", "0.1", "--error", "max", "--method", "analytic"], "--method: has no formula"),
        (["--eps", "1", "--target", "0.1", "--estimator", "ibx"], "--estimator: unknown estimator 'ibx'"),
        (["--eps", "1", "--target", "0.1", "--dataset-param", "p=3", "--dataset", "binomial"], "--dataset-param p:"),
        (["--users", "100", "--target", "0.001", "--error", "halfwidth"], "the error is still 0.0195"),
    ],
)
def test_bad_input_is_one_line_with_exit_code_2(extra, expected, tmp_path):
    out = tmp_path / "curve.nc"
    line = one_line_error(["plan", "krr", "-d", "integers:0..99", *extra, "-o", str(out)])
    assert expected in line
    assert not out.exists()


def test_cli_prints_the_answer_and_writes_the_curve(tmp_path):
    out, fig = tmp_path / "curve.nc", tmp_path / "curve.png"
    args = ["plan", "krr", "-d", "integers:0..99", "--eps", "1", "--target", "0.01", "--error", "halfwidth"]
    result = runner.invoke(app, [*args, "-o", str(out), "--figure", str(fig)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("1,332,726 users for half-width of the widest 95 % interval 0.01 at eps = 1")
    assert "(analytic)" in result.output
    with xr.open_dataset(out) as ds:
        assert ds.attrs["question"] == "users" and ds.attrs["answer"] == 1_332_726
        assert ds.attrs["method"] == "analytic"
        assert (ds["error"].diff("users") < 0).all()
        assert ds["error"].sel(users=ds["users"].values.min()) > 0.01 > ds["error"].isel(users=-1)
    assert fig.stat().st_size > 0


def test_public_api():
    answer = ldpsim.plan("krr", "integers:0..9", eps=1.0, users=1000, error="halfwidth")
    assert isinstance(answer, ldpsim.Plan) and answer.question == "error"
    assert answer.answer == pytest.approx(norm.ppf(0.975) * math.sqrt(krr_variance(10, 1.0) / 1000))

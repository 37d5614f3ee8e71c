"""`ldpsim.testing.parametrize_with_checks`: one test id per contract check, each runnable alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from helpers import make

from ldpsim import Integers
from ldpsim.testing import check_mechanism, parametrize_with_checks, plugin_checks

KRR4 = Integers(low=0, high=3)


def _names(plugin):
    return [name for name, _ in plugin_checks(plugin)]


def test_a_mechanism_gets_every_check_of_check_mechanism_in_its_order(monkeypatch):
    import ldpsim.theory.checks as checks

    called = []
    for name in _names(make("mechanism", "krr", KRR4, eps=1.0)):
        monkeypatch.setattr(checks, name, lambda *a, _n=name, **k: called.append(_n))
    listed = [name for name, _ in checks.mechanism_checks()]  # rebuilt: binds the patched functions
    check_mechanism(make("mechanism", "krr", KRR4, eps=1.0))
    assert called == listed and len(listed) == 17


def test_a_broken_rule_fails_its_own_check_only():
    mech = make("mechanism", "krr", KRR4, eps=1.0)

    def unchecked(self, reports):  # right numbers, but skips the checks the public wrapper makes
        return self._structured_likelihood(reports)

    broken = type("BrokenKRR", (type(mech),), {"structured_likelihood": unchecked})(KRR4, eps=1.0)
    failed = []
    for name, check in plugin_checks(broken):
        try:
            check(broken)
        except Exception:  # any failure counts
            failed.append(name)
    assert failed == ["check_hooks"]


def test_each_kind_of_plugin_gets_its_checks():
    assert _names(make("mechanism", "spl", ldpsim_product(), eps=1.0))[-1] == "check_marginal_estimates"
    assert _names(make("estimator", "ibu")) == ["check_estimator"]
    assert _names(make("metric", "tv")) == ["check_metric"]
    with pytest.raises(TypeError, match="is not a mechanism, estimator, dataset or metric"):
        plugin_checks(object())


def ldpsim_product():
    from ldpsim import Product

    return Product(
        attributes=[
            {"name": "a", "kind": "integers", "low": 0, "high": 1},
            {"name": "b", "kind": "categorical", "values": ["x", "y"]},
        ]
    )


def test_the_marker_gives_one_test_id_per_plugin_and_check(tmp_path):
    mark = parametrize_with_checks([make("mechanism", "krr", KRR4, eps=1.0), make("metric", "tv")])
    (argnames, cases) = mark.args[:2]
    ids = mark.kwargs["ids"]
    assert argnames == ("plugin", "check") and len(cases) == len(ids) == 18
    assert ids[0] == "krr(eps=1.0)-check_parameters" and ids[-1] == "tv()-check_metric"
    assert len(set(ids)) == len(ids)


def test_a_plugin_authors_suite_reports_each_check(tmp_path):
    """What a third party writes: pytest collects and passes one test per check."""
    (tmp_path / "test_mine.py").write_text(
        textwrap.dedent(
            """
            from ldpsim import Integers, get_registry
            from ldpsim.testing import parametrize_with_checks

            MECH = get_registry().create("mechanism", "krr", Integers(low=0, high=3), eps=1.0)

            @parametrize_with_checks([MECH])
            def test_contract(plugin, check):
                check(plugin)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_mine.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "17 passed" in done.stdout

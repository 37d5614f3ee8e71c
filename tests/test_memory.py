import pytest

from ldpsim.base.errors import LdpsimError
from ldpsim.base.memory import MemoryLimitError, available_memory, format_bytes, require_memory


def test_available_memory_is_plausible():
    assert 1 << 20 < available_memory() < 1 << 50


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(34_359_738_368) == "34.4 GB"


def test_refuses_more_than_the_machine_has_in_one_line():
    with pytest.raises(MemoryLimitError) as info:
        require_memory(10 * available_memory(), "the dense 65536 x 65536 matrix", hint="use the structured operator")
    msg = str(info.value)
    assert isinstance(info.value, LdpsimError)
    assert "\n" not in msg and "would need" in msg and "use the structured operator" in msg


def test_allows_small_allocations():
    require_memory(1 << 20, "a small array", hint="none needed")


def test_a_run_refuses_an_inversion_beyond_memory_before_simulating(monkeypatch, tmp_path):
    import ldpsim
    from ldpsim.base import memory
    from ldpsim.running import tasks

    monkeypatch.setattr(memory, "available_memory", lambda: 1 << 30)
    monkeypatch.setattr(tasks, "simulate", lambda *a, **k: pytest.fail("simulated before refusing"))
    doc = {
        "name": "wide",
        "users": 1000,
        "domain": {"kind": "grid", "rows": 100, "cols": 100},
        "dataset": {"name": "uniform"},
        "cohorts": {"all": {"reports": [{"mechanism": "planar-geometric", "eps": 1.0}]}},
        "estimators": ["ibu", "inv-p"],
        "metrics": ["tv"],
    }
    with pytest.raises(
        MemoryLimitError,
        match=r"matrix inversion on the 10000 x 10000 matrix of \[planar-geometric\] would need 2\.4 GB",
    ):
        ldpsim.run_scenario(doc)
    doc["estimators"] = ["ibu"]  # no inversion: nothing to refuse up front
    monkeypatch.setattr(tasks, "simulate", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("simulating")))
    with pytest.raises(RuntimeError, match="simulating"):
        ldpsim.run_scenario(doc)

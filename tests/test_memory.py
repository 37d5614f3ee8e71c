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


def test_the_available_memory_is_read_again_after_a_while(monkeypatch):
    """Small runs check memory thousands of times: one reading stands for a moment, not for the process."""
    from ldpsim.base import memory

    readings = iter([5 << 30, 7 << 30, 9 << 30])
    monkeypatch.setattr(memory, "_read_available_memory", lambda: next(readings))
    monkeypatch.setattr(memory, "_reading", None)
    clock = [100.0]
    monkeypatch.setattr(memory, "_clock", lambda: clock[0])
    assert memory.available_memory() == 5 << 30
    clock[0] += memory.MEMORY_READING_SECONDS / 2
    assert memory.available_memory() == 5 << 30  # the same reading
    clock[0] += memory.MEMORY_READING_SECONDS
    assert memory.available_memory() == 7 << 30  # read again
    clock[0] -= 10  # a clock that went back (another process's reading): read again
    assert memory.available_memory() == 9 << 30

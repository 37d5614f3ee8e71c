import pytest

from ldpsim.errors import LdpsimError
from ldpsim.memory import MemoryLimitError, available_memory, format_bytes, require_memory


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

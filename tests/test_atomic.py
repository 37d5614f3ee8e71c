import os
import stat

import pytest

from ldpsim.base.atomic import atomic_path


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_behind(tmp_path):
    target = tmp_path / "out.nc"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.nc"]


def test_a_finished_write_replaces_the_file_with_the_mode_of_a_new_file(tmp_path):
    target = tmp_path / "out.nc"
    target.write_text("old")
    old_mask = os.umask(0o027)
    try:
        with atomic_path(target, suffix=".nc") as tmp:
            assert tmp.parent == tmp_path and tmp.suffix == ".nc"
            tmp.write_text("new")
    finally:
        os.umask(old_mask)
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.nc"]

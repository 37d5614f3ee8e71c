"""The test helpers find shared data only where the workplace puts it, never at a machine's path."""

from pathlib import Path

import pytest
from helpers import shared_data


def test_shared_data_is_taken_from_the_folder_the_environment_names(tmp_path, monkeypatch):
    (tmp_path / "values.csv").write_text("age\n30\n")
    monkeypatch.setenv("LDPSIM_SHARED_DATA", str(tmp_path))
    assert shared_data("values.csv") == tmp_path / "values.csv"


def test_a_missing_shared_file_skips_naming_the_only_two_places_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("LDPSIM_SHARED_DATA", str(tmp_path))
    beside_checkout = Path(__file__).resolve().parents[2] / "shared" / "data"
    with pytest.raises(pytest.skip.Exception) as skipped:
        shared_data("no-such-file.csv")
    assert f"not found in {tmp_path} or {beside_checkout} (" in str(skipped.value)

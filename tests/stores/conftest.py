"""Store tests keep every cache (shard indexes included) under their tmp_path."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _home_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")

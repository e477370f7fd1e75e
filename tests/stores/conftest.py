"""Store tests keep every cache of the stores (shard indexes included) under their tmp_path;
the native operators and the sample data stay in the session's cache, built once."""
from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _home_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("DALI_PIPES_CACHE", os.environ.get("DALI_PIPES_CACHE") or
                       os.path.join(os.path.expanduser("~"), ".cache", "dali-pipes"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")

"""The caches of the nightly fixed cost: computed once per version, recomputed when it changes."""

from __future__ import annotations

import polars as pl

from pipelines.lib.storage import cache


def test_package_text_is_computed_once_per_version_for_every_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    calls = []

    def compute(text="bundle-1"):
        calls.append(text)
        return text

    assert cache.package_text("vega_bundle", "1.0", compute) == "bundle-1"
    assert cache.package_text("vega_bundle", "1.0", lambda: compute("other")) == "bundle-1"
    assert calls == ["bundle-1"]
    assert cache.package_text("vega_bundle", "2.0", lambda: compute("bundle-2")) == "bundle-2"
    assert [p.name for p in (tmp_path / "xdg" / "fleet-telemetry" / "vega_bundle").iterdir()] == ["2.0"]


def test_an_unwritable_user_cache_only_costs_a_recomputation(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert cache.package_text("vega_bundle", "1.0", lambda: "bundle") == "bundle"
    assert cache.package_text("vega_bundle", "1.0", lambda: "again") == "again"


def test_cached_frames_follow_their_version(home):
    calls = []

    def compute(v):
        calls.append(v)
        return {"a": pl.DataFrame({"x": [v]})}

    first = cache.cached_frames(home, "views", "v1", lambda: compute(1))
    again = cache.cached_frames(home, "views", "v1", lambda: compute(99))
    assert first["a"].equals(again["a"]) and calls == [1]
    newer = cache.cached_frames(home, "views", "v2", lambda: compute(2))
    assert newer["a"]["x"].to_list() == [2] and calls == [1, 2]
    assert [p.name for p in (home.root / "cache" / "views").iterdir()] == ["v2"]


def test_package_frames_are_shared_by_data_homes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    calls = []

    def compute():
        calls.append(1)
        return {"sweeps": pl.DataFrame({"x": [1.5]})}

    a = cache.package_frames("model_views", "code-1", compute)
    b = cache.package_frames("model_views", "code-1", compute)
    assert a["sweeps"].equals(b["sweeps"]) and calls == [1]
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # unwritable: computed, not an error
    assert cache.package_frames("model_views", "code-1", compute)["sweeps"]["x"].to_list() == [1.5]

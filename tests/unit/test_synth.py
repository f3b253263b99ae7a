"""`fleet synth` is deterministic, and every landing format carries the same data."""

import hashlib
from pathlib import Path

import polars as pl
import pytest

from pipelines.cli import main
from pipelines.lib.ingest import ingest_day
from pipelines.lib.paths import DataHome

ARGS = ["synth", "--days", "2", "--start", "2026-11-20", "--runs-per-day", "8", "--seed", "5"]


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_same_seed_same_bytes(tmp_path, fmt):
    main(ARGS + ["--out", str(tmp_path / "a"), "--format", fmt])
    main(ARGS + ["--out", str(tmp_path / "b"), "--format", fmt])
    a, b = _digests(tmp_path / "a"), _digests(tmp_path / "b")
    assert a == b and len(a) == 4
    assert set(a) == {
        f"synthetic/2026-11-2{d}/{t}.{fmt}" for d in (0, 1) for t in ("runs", "utilisation_samples")
    }


def test_gzip_is_reproducible_too(tmp_path):
    main(ARGS + ["--out", str(tmp_path / "a"), "--gzip"])
    main(ARGS + ["--out", str(tmp_path / "b"), "--gzip"])
    assert _digests(tmp_path / "a") == _digests(tmp_path / "b")


def test_other_seed_other_fleet(tmp_path):
    main(ARGS + ["--out", str(tmp_path / "a")])
    main(ARGS[:-1] + ["6", "--out", str(tmp_path / "b")])
    assert _digests(tmp_path / "a") != _digests(tmp_path / "b")


def test_every_format_ingests_to_the_same_rows(tmp_path, hw):
    frames = {}
    for fmt in ("jsonl", "csv", "parquet"):
        home = DataHome.resolve(tmp_path / fmt)
        main(ARGS + ["--out", str(home.landing), "--format", fmt] + (["--gzip"] if fmt == "csv" else []))
        result = ingest_day(home, "2026-11-20", hw.platforms)
        assert result.quarantine.height == 0
        frames[fmt] = result
    for fmt in ("csv", "parquet"):
        assert frames[fmt].runs.drop("source").equals(frames["jsonl"].runs.drop("source"))
        assert frames[fmt].utilisation_samples.equals(frames["jsonl"].utilisation_samples)


def test_synthetic_fleet_has_every_role_and_platform(small_day):
    runs, samples = small_day.runs, small_day.samples
    assert set(samples["role"].unique()) == {"trainer", "sparse_ps", "dense_ps", "reader"}
    expected = (
        runs.select(pl.sum_horizontal("n_trainers", "n_sparse_ps", "n_dense_ps", "n_readers"))
        .to_series()
        .sum()
    )
    assert samples.select(pl.struct("run_id", "server_id").n_unique()).item() == expected
    assert (
        samples.filter(pl.col("role") != "trainer")["gpu_util"].null_count()
        == samples.filter(pl.col("role") != "trainer").height
    )
    for c in ("cpu_util", "mem_cap_util", "mem_bw_util", "net_bw_util"):
        assert samples[c].min() >= 0 and samples[c].max() <= 1

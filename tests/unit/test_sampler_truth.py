"""The sampler's truth of the waste it makes: drawn from the same random stream as the samples (which it does
not change), covering every server and run, written beside the landing root where ingest never looks."""

from __future__ import annotations

import polars as pl

from pipelines.lib.storage.landing import walk
from synthetic_fleet import truth as truth_module
from synthetic_fleet.sampler import sample_day
from synthetic_fleet.servers import STRAGGLER_SLOWDOWN
from synthetic_fleet.writers import read_truth, truth_root, write_day

DAY = "2026-11-02"


def test_truth_leaves_the_samples_as_they_were_and_does_not_depend_on_noise(hw, models):
    plain = sample_day(DAY, 20, 5, hw, models)
    with_truth = sample_day(DAY, 20, 5, hw, models, truth=True)
    noisy = sample_day(DAY, 20, 5, hw, models, truth=True, noise_scale=8.0)
    assert plain.truth is None
    assert with_truth.samples.equals(plain.samples) and with_truth.runs.equals(plain.runs)
    assert not noisy.samples.equals(plain.samples)
    assert noisy.truth.servers.equals(with_truth.truth.servers)
    assert noisy.truth.roles.equals(with_truth.truth.roles)


def test_truth_covers_every_server_and_role_and_never_needs_more_than_held(hw, models):
    fleet = sample_day(DAY, 60, 5, hw, models, truth=True)
    servers, roles = fleet.truth.servers, fleet.truth.roles
    assert set(servers["server_id"]) == set(fleet.samples["server_id"])
    held = (
        fleet.runs.unpivot(
            ["n_trainers", "n_sparse_ps", "n_dense_ps", "n_readers"], index="run_id", value_name="n"
        )
        .filter(pl.col("n") > 0)
        .height
    )
    assert roles.height == held
    assert ((roles["needed_servers"] >= 1) & (roles["needed_servers"] <= roles["n_servers"])).all()
    assert (roles["recoverable_servers"] == roles["n_servers"] - roles["needed_servers"]).all()
    slowed = servers.filter(pl.col("straggler") & (pl.col("role") == "trainer"))  # trainers vary by ~3 %
    assert slowed.height and (slowed["multiplier"] < 1.2 * STRAGGLER_SLOWDOWN).all()
    hot = servers.filter(pl.col("hot_shard"))
    ratio = truth_module.definitions()["hot_shard_ratio"]
    assert hot.height and (hot["role"] == "sparse_ps").all() and (hot["ratio_to_median"] >= ratio).all()


def test_truth_is_written_beside_the_landing_root_where_ingest_never_reads(tmp_path, hw, models):
    fleet = sample_day(DAY, 5, 5, hw, models, truth=True)
    landing = tmp_path / "landing"
    write_day(fleet, landing)
    folder = truth_root(landing) / "synthetic" / DAY
    assert folder == tmp_path / "truth" / "synthetic" / DAY
    back = read_truth(folder)
    assert back.servers.equals(fleet.truth.servers) and back.roles.equals(fleet.truth.roles)
    assert sorted(f.path.name for f in walk(landing)) == ["runs.jsonl", "utilisation_samples.jsonl"]

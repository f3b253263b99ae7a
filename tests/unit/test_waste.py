"""Right-sizing, stragglers and hot shards on hand-made days whose answers are known, agreement with the
recommender's sizing, and the property that lets days merge: a run's results depend on that run alone."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.lib.analysis import analytics, rightsizing, waste
from pipelines.lib.contracts import contract, resources
from pipelines.lib.paths import DataHome
from pipelines.lib.storage import lake
from synthetic_fleet.sampler import sample_day
from tests.support.hypo import examples
from workload_model import fields

T0 = dt.datetime(2026, 11, 20, 0, 0, tzinfo=dt.UTC)
DAY = "2026-11-20"
SAMPLE_S = 300


def _windows(rows: list[tuple]) -> pl.DataFrame:
    """server_windows rows from (run_id, server_id, role, hour, values): 12 samples, 5 minutes apart."""
    out = []
    for run_id, server_id, role, hour, values in rows:
        start = T0 + dt.timedelta(hours=hour)
        out.append(
            {
                "day": T0.date(),
                "run_id": run_id,
                "server_id": server_id,
                "role": role,
                "window_start": start,
                "n_samples": 12,
                "first_ts": start,
                "last_ts": start + dt.timedelta(seconds=11 * SAMPLE_S),
                **{f"{r}_util": values.get(r) for r in resources()},
            }
        )
    return contract("server_windows").conform(pl.DataFrame(out, infer_schema_length=None))


def _runs(ids: list[str], platform: str = "cpu") -> pl.DataFrame:
    return pl.DataFrame(
        {"run_id": ids, "source": "test", "model_name": "M1prod", "platform": platform},
    )


def test_targets_come_from_the_contracts_and_are_checked():
    t = waste.Targets.defaults()
    assert t.target_p95_util == contract("run_efficiency").parameters["target_p95_util"] == 0.8
    assert (t.straggler_ratio, t.hot_shard_ratio, t.sustained_share) == (0.75, 2.0, 0.5)
    assert waste.Targets.defaults(target_p95_util=0.7).target_p95_util == 0.7
    for bad in (
        {"target_p95_util": 0.0},
        {"straggler_ratio": 1.2},
        {"hot_shard_ratio": 0.9},
        {"sustained_share": 0},
    ):
        with pytest.raises(ValueError, match="out of range"):
            waste.Targets.defaults(**bad)


def test_a_sustained_straggler_is_found_with_its_evidence_and_a_short_dip_is_not():
    rows = []
    for hour in range(4):
        for i in range(5):
            slow = i == 3 or (i == 2 and hour == 0)  # trainer-3 all run long, trainer-2 for one hour of four
            rows.append(
                ("r1", f"r1-trainer-{i}", "trainer", hour, {"cpu": 0.45 if slow else 0.9, "mem_bw": 0.3})
            )
    found = waste.server_outliers(_runs(["r1"]), _windows(rows), DAY, waste.Targets.defaults())
    assert found["server_id"].to_list() == ["r1-trainer-3"]
    row = found.row(0, named=True)
    assert (row["kind"], row["resource"], row["peers"]) == ("straggler", "cpu", 5)
    assert row["ratio"] == pytest.approx(0.5) and row["server_util"] == pytest.approx(0.45)
    assert row["flagged_s"] == pytest.approx(48 * SAMPLE_S) and row["share_of_samples"] == 1.0
    assert row["first_ts"] == T0 and row["last_ts"] == T0 + dt.timedelta(hours=3, seconds=11 * SAMPLE_S)


def test_hot_shards_need_peers_and_gpu_trainers_are_compared_on_their_gpus():
    rows = []
    ps = {"r2": [0.1, 0.1, 0.11, 0.09, 0.35], "r3": [0.1, 0.35]}  # r3: two PS, max/median < 2 always
    for run, levels in ps.items():
        for i, v in enumerate(levels):
            rows.append((run, f"{run}-ps-{i}", "sparse_ps", 0, {"cpu": 0.2, "mem_bw": v, "net_bw": 0.1}))
    for i, g in enumerate([0.8, 0.8, 0.3]):
        rows.append(("r4", f"r4-trainer-{i}", "trainer", 0, {"cpu": 0.2, "gpu": g}))
    rows.append(("r5", "r5-trainer-0", "trainer", 0, {"cpu": 0.1}))  # a lone trainer has no peers
    found = waste.server_outliers(
        _runs(["r2", "r3", "r4", "r5"]), _windows(rows), DAY, waste.Targets.defaults()
    )
    got = {(r["server_id"], r["kind"], r["resource"]): r["ratio"] for r in found.iter_rows(named=True)}
    assert got.keys() == {("r2-ps-4", "hot_shard", "mem_bw"), ("r4-trainer-2", "straggler", "gpu")}
    assert got[("r2-ps-4", "hot_shard", "mem_bw")] == pytest.approx(3.5)
    assert got[("r4-trainer-2", "straggler", "gpu")] == pytest.approx(0.375)


def _stats(run_id: str, role: str, p95: dict[str, float], peak: dict[str, float] | None = None) -> list[dict]:
    return [
        {
            "day": T0.date(),
            "run_id": run_id,
            "model_name": "(unknown)",
            "platform": "pai_t4",
            "placement": "remote_ps",
            "role": role,
            "resource": r,
            "n_servers": 1,
            "n_samples": 10,
            "mean_util": v / 2,
            "p50_util": v / 2,
            "p90_util": v * 0.9,
            "p95_util": v,
            "max_util": (peak or {}).get(r, v),
        }
        for r, v in p95.items()
    ]


def test_headroom_sizing_spreads_the_load_of_what_spreads_and_says_why(hw, models):
    """Telemetry only (a platform the workload model does not know): p95 x n / n' <= target for the
    resources whose load spreads; a resource above the target keeps every server; memory that is per server
    (a reader's buffers) does not block."""
    runs = pl.DataFrame(
        {
            "run_id": ["h1"],
            "source": ["pai"],
            "platform": ["pai_t4"],
            "placement": ["remote_ps"],
            "n_trainers": [4],
            "n_sparse_ps": [10],
            "n_dense_ps": [1],
            "n_readers": [3],
        }
    ).with_columns(
        pl.lit(None, pl.String).alias("model_name"),
        *[pl.lit(None).alias(f) for f in (*fields.shape_fields(), "batch_size")],
    )
    stats = contract("run_role_stats").conform(
        pl.DataFrame(
            _stats("h1", "trainer", {"cpu": 0.9, "mem_bw": 0.3}, {"cpu": 0.95})
            + _stats(
                "h1",
                "sparse_ps",
                {"cpu": 0.2, "mem_cap": 0.4, "mem_bw": 0.1, "net_bw": 0.1},
                {"mem_cap": 0.6},
            )
            + _stats("h1", "reader", {"cpu": 0.1, "mem_cap": 0.95})
        )
    )
    eff = waste.run_efficiency(
        runs, stats, contract("server_windows").empty_frame(), DAY, hw, models, waste.Targets.defaults()
    )
    got = {r["role"]: r for r in eff.iter_rows(named=True)}
    assert set(eff["basis"]) == {"utilisation_headroom", "no_telemetry"}
    ps, trainer, reader, dense = got["sparse_ps"], got["trainer"], got["reader"], got["dense_ps"]
    assert (ps["right_sized_servers"], ps["servers_recoverable"], ps["binding_resource"]) == (5, 5, "mem_cap")
    assert ps["p95_after_util"] == pytest.approx(0.8) and ps["limited_by"] == "utilisation"
    assert ps["throughput_risk"] == pytest.approx(1 - 1 / 1.2)  # the busiest sample, 0.6 x 10/5, exceeds 1
    assert (trainer["right_sized_servers"], trainer["limited_by"]) == (4, "utilisation")
    assert (reader["right_sized_servers"], reader["limited_by"]) == (1, "one_server")
    assert dense["basis"] == "no_telemetry" and dense["right_sized_servers"] is None
    assert ps["provisioned_w_recoverable"] == pytest.approx(5 * hw.platforms[hw.remote_ps_platform].peak_w)
    assert trainer["provisioned_w_recoverable"] is None or trainer["servers_recoverable"] == 0


@pytest.fixture(scope="module")
def demo_day(hw, models):
    fleet = sample_day(DAY, 40, 2021, hw, models)
    runs = fleet.runs.with_columns(
        pl.lit(DAY).str.to_date().alias("day"), pl.lit("synthetic").alias("source")
    )
    windows = analytics.server_windows(fleet.samples, DAY)
    stats = analytics.run_role_stats(runs, fleet.samples, DAY, windows)
    eff = waste.run_efficiency(runs, stats, windows, DAY, hw, models, waste.Targets.defaults())
    return runs, eff


def test_right_sizing_never_goes_below_the_recommenders_count(demo_day, hw, models):
    from workload_model.sizing import batch_on, size_servers, workload_of_model

    runs, eff = demo_day
    model = eff.filter(pl.col("basis") == "workload_model")
    assert model.height == eff.height  # every synthetic run carries its workload
    floored = model.filter(pl.col("recommender_servers").is_not_null())
    assert set(floored["role"]) == {"sparse_ps", "dense_ps", "reader"}
    floor = floored.select(pl.min_horizontal("n_servers", "recommender_servers")).to_series()
    assert (floored["right_sized_servers"] >= floor).all()
    # The floor is what the recommender gives the run's model family on the run's system.
    run = runs.filter(pl.col("platform") == "cpu").row(0, named=True)
    w = workload_of_model(models[run["model_name"]])
    system = {k: w[k] for k in fields.workload_keys() if w.get(k) is not None} | {
        "platform": "cpu",
        "placement": run["placement"],
        "batch_size": batch_on(w, "cpu", 0),
        "n_trainers": run["n_trainers"],
        "n_sparse_ps": 0,
        "n_dense_ps": 0,
        "n_readers": 0,
    }
    want = size_servers(pl.DataFrame([system]), hw).row(0, named=True)
    got = dict(
        floored.filter(pl.col("run_id") == run["run_id"]).select("role", "recommender_servers").iter_rows()
    )
    assert got == {
        "sparse_ps": want["n_sparse_ps"],
        "dense_ps": want["n_dense_ps"],
        "reader": want["n_readers"],
    }


def test_right_sized_counts_meet_the_target_and_keep_the_throughput(demo_day):
    _, eff = demo_day
    judged = eff.filter(pl.col("right_sized_servers") < pl.col("n_servers"))
    assert judged.height > 0
    limit = pl.max_horizontal("target_p95_util", "binding_p95_util") + 1e-9
    assert (judged["p95_after_util"] <= judged.select(limit).to_series()).all()
    assert set(eff["limited_by"]) <= {"utilisation", "throughput", "capacity", "recommender", "one_server"}
    assert ((eff["throughput_risk"] >= 0) & (eff["throughput_risk"] <= 0.011)).all()  # the recommender's 99%


def _analysed(fleet, day: str, hw, models, drop_workload: bool):
    runs = fleet.runs.with_columns(
        pl.lit(day).str.to_date().alias("day"), pl.lit("synthetic").alias("source")
    )
    if drop_workload:  # half the runs as a public trace would have them: no workload, headroom sizing
        gone = pl.int_range(pl.len()) % 2 == 0
        runs = runs.with_columns(pl.when(gone).then(None).otherwise(pl.col("model_name")).alias("model_name"))
    return runs, fleet.samples


@settings(
    max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seeds=st.lists(st.integers(0, 10_000), min_size=2, max_size=3, unique=True),
    runs_per_day=st.integers(2, 6),
    drop_workload=st.booleans(),
)
def test_days_merge_a_run_depends_on_its_own_day_only(
    tmp_path_factory, hw, models, seeds, runs_per_day, drop_workload
):
    """Right-sizing and outliers computed day by day (both at once, as the nightly step does) equal those
    computed over the pooled days (one at a time), and the
    merged fleet totals (waste_summary over the per-day files) equal the totals of the pooled rows."""
    home = DataHome.resolve(tmp_path_factory.mktemp("merge"))
    targets = waste.Targets.defaults()
    days = [(dt.date(2026, 11, 1) + dt.timedelta(days=i)).isoformat() for i in range(len(seeds))]
    per_day, pooled_in = [], []
    for day, seed in zip(days, seeds, strict=True):
        runs, samples = _analysed(
            sample_day(day, runs_per_day, seed, hw, models), day, hw, models, drop_workload
        )
        windows = analytics.server_windows(samples, day)
        stats = analytics.run_role_stats(runs, samples, day, windows)
        # the day as the nightly step computes it (both tables at once); pooled below, one at a time
        both = waste.day_waste(runs, stats, windows, day, hw, models, targets)
        eff, found = both["run_efficiency"], both["server_outliers"]
        lake.write_partition(home, "run_efficiency", day, eff)
        lake.write_partition(home, "server_outliers", day, found)
        per_day.append((eff, found))
        pooled_in.append((runs, samples))
    runs = pl.concat([r for r, _ in pooled_in], how="diagonal_relaxed")
    samples = pl.concat([s for _, s in pooled_in])
    windows = analytics.server_windows(samples, days[0])
    stats = analytics.run_role_stats(runs, samples, days[0], windows)
    pooled_eff = waste.run_efficiency(runs, stats, windows, days[0], hw, models, targets)
    pooled_out = waste.server_outliers(runs, windows, days[0], targets)
    for pooled, parts, key in (
        (pooled_eff, [e for e, _ in per_day], ["run_id", "role"]),
        (pooled_out, [o for _, o in per_day], ["run_id", "server_id", "kind"]),
    ):
        merged = pl.concat(parts).drop("day").sort(key)
        pooled = pooled.drop("day").sort(key)
        assert merged.drop(pl.selectors.float()).equals(pooled.drop(pl.selectors.float()))
        for c in merged.select(pl.selectors.float()).columns:
            assert ((merged[c] - pooled[c]).abs().fill_null(0) <= 1e-9).all(), c
            assert (merged[c].is_null() == pooled[c].is_null()).all(), c
    summary = waste.waste_summary(
        analytics.table_relation(home, "run_efficiency"), analytics.table_relation(home, "server_outliers")
    )
    by_role = summary.group_by("role").agg(
        pl.col("n_servers", "servers_recoverable", "outlier_servers").sum()
    )
    want = pooled_eff.group_by("role").agg(
        pl.col("n_servers").sum().cast(pl.Int64), pl.col("servers_recoverable").sum().cast(pl.Int64)
    )
    assert by_role.drop("outlier_servers").sort("role").equals(want.sort("role"))
    assert by_role["outlier_servers"].sum() == pooled_out.height


def test_a_days_waste_computes_only_the_tables_asked_for(hw, models):
    day = "2026-11-03"
    runs, samples = _analysed(sample_day(day, 3, 7, hw, models), day, hw, models, False)
    windows = analytics.server_windows(samples, day)
    targets = waste.Targets.defaults()
    only = waste.day_waste(runs, None, windows, day, hw, models, targets, {"server_outliers"})
    assert only.keys() == {"server_outliers"}
    got, want = only["server_outliers"], waste.server_outliers(runs, windows, day, targets)
    assert got.height == want.height > 0
    assert got.drop(pl.selectors.float()).equals(want.drop(pl.selectors.float()))
    with pytest.raises(ValueError, match="run_role_stats"):
        waste.day_waste(runs, None, windows, day, hw, models, targets, {"run_efficiency"})


_LOADS = st.one_of(st.none(), st.just(float("nan")), st.sampled_from([0.0, 0.4, 0.8, 1.2]), st.floats(0, 2))


@settings(max_examples=examples(200), deadline=None)
@given(rows=st.lists(st.lists(st.tuples(_LOADS, _LOADS), min_size=9, max_size=9), min_size=0, max_size=12))
def test_the_binding_resource_is_the_first_closest_to_its_limit(rows):
    """Against a row-by-row reference: scores after / limit (null or NaN: none), the first maximum in contract
    order, nothing when no score is at least 0; ties, nulls and NaN included."""
    names = resources()
    assert len(names) == 9
    data = {}
    for j, r in enumerate(names):
        data[f"after_{r}"] = [row[j][0] for row in rows]
        data[f"limit_{r}"] = [row[j][1] for row in rows]
        data[f"p95_{r}"] = [float(i * 10 + j) for i in range(len(rows))]
    frame = pl.DataFrame(data, schema=dict.fromkeys(data, pl.Float64))
    got = rightsizing._with_binding(frame, "after", "limit")
    for i, row in enumerate(rows):
        scores = []
        for a, lim in row:
            if a is None or lim is None:
                s = None
            elif lim == 0:  # as polars divides: x / 0 is inf for x > 0, NaN for 0
                s = float("inf") if a > 0 else None
            else:
                s = a / lim
            scores.append(-1.0 if s is None or s != s else s)
        best = max(scores)
        want = names[scores.index(best)] if best >= 0 else None
        r = got.row(i, named=True)
        assert r["binding_resource"] == want
        if want is None:
            assert r["binding_p95_util"] is None and r["p95_after_util"] is None
        else:
            j = names.index(want)
            assert r["binding_p95_util"] == float(i * 10 + j)
            after, got_after = row[j][0], r["p95_after_util"]
            assert got_after == after or (after != after and got_after != got_after)  # NaN is NaN

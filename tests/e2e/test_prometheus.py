"""A real Prometheus (Debian's package, installed by `make test`), started here on 127.0.0.1 over a TSDB
backfilled with `promtool tsdb create-blocks-from openmetrics`, and `fleet ingest --source prometheus --url`
against it: the cluster's scrapes (tests/support/prom_fixtures.py) give what the same scrapes give
delivered as files, and the synthetic fleet written by `fleet synth --format openmetrics` comes back with the
same trainer-vs-PS distributions and server counts as its contract files (the round trip)."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

from pipelines.lib.analysis import analytics
from pipelines.lib.contracts import resources
from pipelines.lib.ingest.prometheus import server
from pipelines.lib.paths import DataHome
from pipelines.lib.storage import lake
from tests.support import prom_fixtures as pf
from tests.support.cli import BIN, run

pytestmark = pytest.mark.usefixtures("fleet_cli")  # every test crosses the process boundary
ROUND_TRIP_DAY = "2026-11-20"
ROUND_TRIP_RUNS = 6


@pytest.fixture(scope="module")
def prometheus_binaries():
    try:
        return server.binaries()
    except server.PrometheusMissing as exc:
        pytest.fail(f"{exc} (`make test` installs it: Debian package 'prometheus')")


@pytest.fixture(scope="module")
def prometheus_server(tmp_path_factory, prometheus_binaries):
    work = tmp_path_factory.mktemp("prometheus")
    files = pf.write(work / "scrapes")
    server.backfill(files, work / "tsdb")
    with server.serving(work / "tsdb", work / "server") as url:
        yield url, files


def _fleet(*args: str, timeout: int = 900):
    return run([str(BIN / "fleet"), *args], timeout=timeout)


def test_ingest_pulls_raw_samples_and_gives_what_the_scrape_files_give(tmp_path, prometheus_server):
    url, files = prometheus_server
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text(pf.mapping_yaml())
    pulled = tmp_path / "pulled"
    p = _fleet(
        "ingest",
        "--source",
        "prometheus",
        "--url",
        url,
        "--from",
        pf.DAY,
        "--mapping",
        str(mapping),
        "--page-minutes",
        "90",
        "--home",
        str(pulled),
    )
    assert p.returncode == 0, p.stderr
    assert f"pulled {pf.DAY}: 3 job(s) started that day" in p.stdout  # ctr-a, gpu-b, run-d (not late-c)
    assert "NOTE (Prometheus)" in p.stdout and "on two nodes" in p.stdout
    # the same scrapes delivered as files
    exports = tmp_path / "exports"
    for f in files:
        (exports / "k8s" / pf.DAY).mkdir(parents=True, exist_ok=True)
        shutil.copy(f, exports / "k8s" / pf.DAY / f.name)
    delivered = tmp_path / "delivered"
    p = _fleet(
        "ingest", "--source", "prometheus", str(exports), "--mapping", str(mapping), "--home", str(delivered)
    )
    assert p.returncode == 0, p.stderr
    a, b = DataHome.resolve(pulled), DataHome.resolve(delivered)
    runs_a = lake.read_partition(a, "runs", pf.DAY).drop("source").sort("run_id")
    runs_b = lake.read_partition(b, "runs", pf.DAY).drop("source").sort("run_id")
    assert runs_a["run_id"].to_list() == ["ml/ctr-a", "ml/gpu-b", "ml/run-d"]
    assert runs_a.equals(runs_b)
    key = ["run_id", "server_id", "ts"]
    s_a = lake.read_partition(a, "utilisation_samples", pf.DAY).sort(key)
    s_b = lake.read_partition(b, "utilisation_samples", pf.DAY).sort(key)
    assert s_a.select(key).equals(s_b.select(key)) and s_a.height == 229 + 60 + 30
    for c in [f"{r}_util" for r in resources()]:
        assert ((s_a[c] - s_b[c]).abs().fill_null(0) < 1e-9).all(), c
        assert s_a[c].null_count() == s_b[c].null_count(), c
    # pulled pages are landing files with a ledger row each, every sample accounted for
    ledger = lake.read_partition(a, "ingest_ledger", pf.DAY)
    assert set(ledger["format"]) == {"prometheus_json"}
    assert (ledger["rows_in"] == ledger["rows_accepted"] + ledger["rows_quarantined"]).all()
    # pulling again replaces the pulled files and gives the same lake
    p = _fleet("ingest", "--source", "prometheus", "--url", url, "--from", pf.DAY, "--home", str(pulled))
    assert p.returncode == 0, p.stderr
    assert lake.read_partition(a, "runs", pf.DAY).drop("source").sort("run_id").equals(runs_a)


def test_a_server_that_cannot_be_reached_is_one_line_and_exit_1(tmp_path):
    p = _fleet(
        "ingest",
        "--source",
        "prometheus",
        "--url",
        "http://127.0.0.1:9",
        "--from",
        pf.DAY,
        "--home",
        str(tmp_path / "h"),
        timeout=120,
    )
    assert (
        p.returncode == 1
        and "cannot reach the server" in p.stderr
        and len(p.stderr.strip().splitlines()) == 1
    )


def test_round_trip_through_prometheus_gives_the_contract_paths_distributions_and_counts(
    tmp_path, prometheus_binaries
):
    contract_home, prom_home = tmp_path / "contract", tmp_path / "prom"
    common = ["--days", "1", "--start", ROUND_TRIP_DAY, "--runs-per-day", str(ROUND_TRIP_RUNS)]
    p = _fleet("synth", *common, "--home", str(contract_home))
    assert p.returncode == 0, p.stderr
    exports = tmp_path / "exports"
    p = _fleet("synth", *common, "--format", "openmetrics", "--out", str(exports), "--home", str(prom_home))
    assert p.returncode == 0, p.stderr
    assert "the mapping that reads them back" in p.stdout
    server.backfill(sorted(exports.rglob("*.om")), tmp_path / "tsdb")
    with server.serving(tmp_path / "tsdb", tmp_path / "server") as url:
        p = _fleet(
            "ingest",
            "--source",
            "prometheus",
            "--url",
            url,
            "--from",
            ROUND_TRIP_DAY,
            "--home",
            str(prom_home),
        )
    assert p.returncode == 0, p.stderr
    p = _fleet("ingest", "--home", str(contract_home))
    assert p.returncode == 0, p.stderr

    got = {
        name: _distributions(DataHome.resolve(h))
        for name, h in (("contract", contract_home), ("prom", prom_home))
    }
    # server counts: runs per platform, role and count, equal
    assert got["prom"]["counts"].equals(got["contract"]["counts"])
    assert got["prom"]["runs"] == got["contract"]["runs"] == ROUND_TRIP_RUNS
    # trainer-vs-PS distributions over all runs: medians within 0.01 (they agree to within a bin)
    medians = got["contract"]["medians"].join(got["prom"]["medians"], on=["role", "resource"], suffix="_p")
    assert medians.height == got["contract"]["medians"].height == got["prom"]["medians"].height >= 12
    worst = float((medians["p50_util"] - medians["p50_util_p"]).abs().max())
    assert worst <= 0.01
    tvp = got["contract"]["tvp"].join(got["prom"]["tvp"], on=["ps_role", "resource"], suffix="_p")
    assert tvp.height == got["contract"]["tvp"].height > 0
    for c in ("trainer_mean_util", "ps_mean_util", "ks_statistic"):
        assert float((tvp[c] - tvp[f"{c}_p"]).abs().max()) <= 0.01, c
    assert (tvp["paper_pattern"] == tvp["paper_pattern_p"]).all()
    assert got["prom"]["samples"] == got["contract"]["samples"]
    (tmp_path / "round_trip.json").write_text(json.dumps({"worst_median_diff": worst}))


def _distributions(home: DataHome) -> dict:
    """Overall trainer-vs-PS summaries and server counts of one day in a home, from its lake."""
    runs, samples = analytics.day_inputs(home, ROUND_TRIP_DAY)
    windows = analytics.server_windows(samples, ROUND_TRIP_DAY)
    stats = analytics.run_role_stats(runs, samples, ROUND_TRIP_DAY, windows)
    dist = analytics.util_distribution(runs, samples, stats, ROUND_TRIP_DAY)
    lake.write_partition(home, "util_distribution", ROUND_TRIP_DAY, dist)
    summary, tvp = analytics.merged_summaries(analytics.table_relation(home, "util_distribution"))
    overall = (pl.col("model_name") == "*") & (pl.col("platform") == "*") & (pl.col("placement") == "*")
    hist = analytics.server_count_hist(runs, ROUND_TRIP_DAY)
    return {
        "runs": runs.height,
        "samples": lake.store(home).row_counts("utilisation_samples").get(ROUND_TRIP_DAY, 0),
        "medians": summary.filter(overall & (pl.col("statistic") == "sample")).select(
            "role", "resource", "p50_util"
        ),
        "tvp": tvp.filter(overall).select(
            "ps_role", "resource", "trainer_mean_util", "ps_mean_util", "ks_statistic", "paper_pattern"
        ),
        "counts": hist.group_by("platform", "role", "n_servers").agg(pl.col("n_runs").sum()).sort(pl.all()),
    }


def test_demo_says_how_to_install_prometheus_when_it_is_missing(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    p = run(
        [str(BIN / "fleet"), "demo", "--source", "prometheus", "--home", str(tmp_path / "h")],
        env={"PATH": str(bare)},
        timeout=120,
    )
    assert p.returncode == 2
    assert "apt-get install prometheus" in p.stderr and "promtool" in p.stderr


def test_demo_through_prometheus_materialises_what_it_pulled(tmp_path, prometheus_binaries):
    home = tmp_path / "h"
    p = _fleet(
        "demo",
        "--source",
        "prometheus",
        "--days",
        "1",
        "--runs-per-day",
        "3",
        "--home",
        str(home),
        "--workers",
        "1",
        timeout=1800,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Prometheus serves them at http://127.0.0.1:" in p.stdout and "job(s) started that day" in p.stdout
    h = DataHome.resolve(home)
    runs = lake.read_table(h, "runs")
    assert runs.height == 3 and set(runs["source"]) == {"prometheus"}
    assert (
        lake.read_table(h, "metric_samples").height > 0 and lake.read_table(h, "util_distribution").height > 0
    )
    assert (home / "reports" / "fleet_report.html").exists()

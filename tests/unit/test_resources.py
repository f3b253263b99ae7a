"""One place to add a resource: every resource list derives from schemas/utilisation_samples.yaml.

The contract marks its resource columns (``resource: true``); the enums of the tables that name a
resource, server_windows' per-resource columns, the SQL column lists (``<<resources: ...>>``), the
right-sizing's resource lists and the report's charts all come from it (the workload model lists only
the resources it predicts, a subset). The second test adds a nullable
resource column to a copy of the contracts and follows it through ingest, the analyses and the charts.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import textwrap

import polars as pl
import pytest

from pipelines.lib.contracts import contract, resources
from pipelines.lib.paths import PROJECT_ROOT, SCHEMAS_DIR, SQL_DIR
from pipelines.lib.query.sqlfiles import RESOURCE_LIST, sql_text
from workload_model import model


def test_every_resource_list_is_the_contracts():
    names = resources()
    assert names[:6] == ("cpu", "mem_cap", "mem_bw", "net_bw", "gpu", "gpu_mem")
    assert {"gpu_tensor", "gpu_nvlink", "gpu_pcie"} <= set(names)
    assert set(model.MODELLED) <= set(names)  # the workload model predicts some of them, no others
    for table, column in (
        ("run_role_stats", "resource"),
        ("util_distribution", "resource"),
        ("run_efficiency", "binding_resource"),
    ):
        assert contract(table).column(column).enum == names, table
    windows = [c.name for c in contract("server_windows").columns if c.name.endswith("_util")]
    assert windows == [f"{r}_util" for r in names]
    # policy lists name resources the contract has
    spreads = contract("run_efficiency").parameters["load_resources"]
    assert all(set(v) <= set(names) for v in spreads.values())
    assert set(contract("server_outliers").column("resource").enum) <= set(names)


def test_sql_resource_lists_are_expanded_from_the_contract():
    templated = [p for p in SQL_DIR.rglob("*.sql") if RESOURCE_LIST.search(p.read_text())]
    assert {p.stem for p in templated} >= {
        "run_role_stats_part",
        "run_role_quantiles",
        "run_role_stats",
        "util_distribution_part",
        "server_windows_part",
        "server_windows",
    }
    for path in templated:
        text = sql_text(str(path.relative_to(SQL_DIR)))
        assert "<<" not in text
        for r in resources():
            assert f"{r}_util" in text or f" {r}," in text or f" {r}\n" in text, (path.name, r)


FLOW = textwrap.dedent(
    """
    import datetime as dt, json, sys
    from pathlib import Path
    import pipelines.lib.paths as paths
    paths.SCHEMAS_DIR = Path(sys.argv[1])           # the copy with one more resource column
    import polars as pl
    from pipelines.lib.analysis import analytics
    from pipelines.lib.storage import lake
    from pipelines.lib.contracts import contract, resources
    from pipelines.lib.ingest import ingest_partition
    from pipelines.lib.analysis import rightsizing, waste
    from dashboards import charts

    home = paths.DataHome.resolve(sys.argv[2])
    day = "2026-11-20"
    folder = home.landing / "lab" / day
    folder.mkdir(parents=True)
    t0 = dt.datetime(2026, 11, 20, 1, tzinfo=dt.UTC)
    run = {"run_id": "r1", "start_ts": "2026-11-20T01:00:00Z", "end_ts": "2026-11-20T02:00:00Z",
           "status": "succeeded", "platform": "cpu", "model_name": "M1prod", "placement": "remote_ps",
           "n_trainers": 1, "n_sparse_ps": 1, "n_dense_ps": 0, "n_readers": 0}
    (folder / "runs.jsonl").write_text(json.dumps(run) + "\\n")
    rows = []
    for i in range(6):
        for server, role, v in (("t0", "trainer", 0.6), ("p0", "sparse_ps", 0.2)):
            rows.append({"run_id": "r1", "server_id": server, "role": role,
                         "ts": (t0 + dt.timedelta(minutes=5 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                         "cpu_util": 0.5, "mem_cap_util": 0.5, "mem_bw_util": 0.5, "net_bw_util": 0.5,
                         "fpga_util": v})
    (folder / "utilisation_samples.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    outcome = ingest_partition(home, day, ["cpu"])
    runs, samples_path = analytics.day_inputs(home, day)
    windows = analytics.server_windows(samples_path, day)
    stats = analytics.run_role_stats(runs, samples_path, day, windows)
    dist = analytics.util_distribution(runs, samples_path, stats, day)
    lake.write_partition(home, "util_distribution", day, dist)
    summary, _ = analytics.merged_summaries(analytics.table_relation(home, "util_distribution"))
    chart = charts.trainer_vs_ps(dist, 1000).to_dict()
    print(json.dumps({
        "promoted": outcome.promoted,
        "resources": list(resources()),
        "waste": "p95_fpga" in rightsizing._observed(stats).columns,
        "lake_column": "fpga_util" in lake.read_partition(home, "utilisation_samples", day).columns,
        "lake_values": lake.read_partition(home, "utilisation_samples", day)["fpga_util"].sort().to_list(),
        "windows": "fpga_util" in windows.columns,
        "stats": stats.filter(pl.col("resource") == "fpga").select("role", "mean_util").sort("role").rows(),
        "dist": dist.filter((pl.col("resource") == "fpga") & (pl.col("statistic") == "sample"))["n"].sum(),
        "summary": summary.filter(
            (pl.col("resource") == "fpga")
            & pl.all_horizontal(pl.col("model_name", "platform", "placement") == "*")
        ).height,
        "enum": list(contract("util_distribution").column("resource").enum),
        "chart": "fpga" in json.dumps(chart),
    }))
    """
)


@pytest.mark.usefixtures("fleet_cli")
def test_a_resource_added_to_the_contract_flows_through_ingest_analyses_and_charts(tmp_path):
    schemas = tmp_path / "schemas"
    shutil.copytree(SCHEMAS_DIR, schemas)
    path = schemas / "utilisation_samples.yaml"
    text = path.read_text()
    extra = (
        "  - {name: fpga_util, type: float64, nullable: true, min: 0, max: 1, unit: fraction,\n"
        '     resource: true, description: "FPGA utilisation (a resource added in one place)."}\n'
    )
    path.write_text(text.replace("  - {name: power_w", extra + "  - {name: power_w"))
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", FLOW, str(schemas), str(tmp_path / "home")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["promoted"]
    assert got["resources"][-1] == "fpga" and got["waste"] and "fpga" in got["enum"]
    assert got["lake_column"] and got["lake_values"] == [0.2] * 6 + [0.6] * 6
    assert got["windows"]
    assert [r for r, _ in got["stats"]] == ["sparse_ps", "trainer"]
    assert [round(m, 9) for _, m in got["stats"]] == [0.2, 0.6]
    assert got["dist"] == 12 and got["summary"] == 4  # 2 roles x (sample, run_mean)
    assert got["chart"]


def test_the_reports_gpu_view_shows_every_gpu_resource_reported():
    from dashboards import charts, report

    rows = [
        (dt.date(2026, 11, 20), "sample", role, res, "M1prod", platform, "remote_ps", b, 5)
        for platform, role, res in (
            ("big_basin", "trainer", "gpu"),
            ("big_basin", "trainer", "gpu_tensor"),
            ("big_basin", "trainer", "cpu"),
            ("big_basin", "sparse_ps", "cpu"),
            ("cpu", "trainer", "cpu"),
        )
        for b in (100, 700)
    ]
    dist = pl.DataFrame(
        rows,
        schema=["day", "statistic", "role", "resource", "model_name", "platform", "placement", "bin", "n"],
        orient="row",
    )
    assert report.gpu_platforms(dist) == ("big_basin",)
    spec = json.dumps(charts.trainer_vs_ps(dist, 1000, platforms=("big_basin",), title="GPU").to_dict())
    assert '"gpu_tensor"' in spec and '"gpu"' in spec
    assert '"gpu_tensor"' not in json.dumps(charts.trainer_vs_ps(dist, 1000).to_dict())  # CPU clusters

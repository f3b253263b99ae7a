"""Parts of the exported report (issue 44): the runs list says "failed" only of a run whose status says so,
the trainer-vs-PS legend lists only the roles in the data, every contents link has its heading."""

import datetime as dt
import json
import re

import polars as pl
import vl_convert

from dashboards import charts
from dashboards.report import SECTIONS, explorer_line
from dashboards.report_html import contents, heading


def _lines(throughput: list[float | None], status: list[str]) -> list[str]:
    runs = pl.DataFrame(
        {
            "run_id": [f"r{i}" for i in range(len(status))],
            "model_name": ["M1prod"] * len(status),
            "n_trainers": [1] * len(status),
            "n_sparse_ps": [4] * len(status),
            "throughput_eps": throughput,
            "status": status,
        },
        schema_overrides={"throughput_eps": pl.Float64},
    )
    return runs.select(explorer_line().alias("line"))["line"].to_list()


def test_a_succeeded_run_without_throughput_is_not_called_failed():
    # telemetry (a CSV without throughput, every Prometheus run) records no throughput for runs that succeeded
    (line,) = _lines([None], ["succeeded"])
    assert line == "r0  M1prod  1 trainer / 4 PSs  no throughput recorded"
    assert "failed" not in line


def test_only_a_run_whose_status_says_failed_is_called_failed():
    lines = _lines([None, None, None, 1234.4], ["failed", "cancelled", "running", "succeeded"])
    assert lines[0].endswith("  no throughput (failed)")
    assert lines[1].endswith("  no throughput (cancelled)")
    assert lines[2].endswith("  no throughput yet (running)")
    assert lines[3].endswith("  1234 ex/s")
    assert [line for line in lines if "failed" in line] == [lines[0]]


def _dist(roles_of: dict[str, list[str]], platform: str = "big_basin") -> pl.DataFrame:
    rows = [
        (dt.date(2026, 11, 20), "sample", role, "cpu", model, platform, "remote_ps", b, 5)
        for model, roles in roles_of.items()
        for role in roles
        for b in (100, 700)
    ]
    return pl.DataFrame(
        rows,
        schema=["day", "statistic", "role", "resource", "model_name", "platform", "placement", "bin", "n"],
        orient="row",
    )


def _legend(spec: dict) -> list[str]:
    """The role entries of the chart's legend as Vega draws it."""
    svg = vl_convert.vegalite_to_svg(spec)
    return re.findall(r">(trainer|sparse_ps|dense_ps|reader)</text>", svg)


def test_the_trainer_vs_ps_legend_lists_only_the_roles_of_the_model_shown():
    # M1prod on Big Basin keeps its tables in HBM (no sparse PS); M3prod holds them on remote PS
    dist = _dist({"M1prod": ["trainer"], "M3prod": ["trainer", "sparse_ps"]})
    chart = charts.trainer_vs_ps(dist, 1000, days=["2026-11-20"], platforms=("big_basin",), title="GPU")
    spec = chart.to_dict()
    params = {p["name"]: p for p in spec["params"]}
    assert params["tvp_model"]["value"] == "M1prod"
    assert params["tvp_roles"]["value"] == {"M1prod": ["trainer"], "M3prod": ["trainer", "sparse_ps"]}
    assert _legend(spec) == ["trainer"]
    params["tvp_model"]["value"] = "M3prod"  # as the selector does
    assert _legend(spec) == ["trainer", "sparse_ps"]
    # the colours stay the role's, whichever roles are listed
    assert '"#d62728"' in json.dumps(spec) and '"#1f77b4"' in json.dumps(spec)


def test_the_exported_trainer_vs_ps_legend_lists_only_the_roles_in_the_data():
    static = charts.trainer_vs_ps(_dist({"M1prod": ["trainer"]}, "cpu"), 1000, static=True)
    assert _legend(static.to_dict()) == ["trainer"]
    both = charts.trainer_vs_ps(_dist({"M1prod": ["trainer", "sparse_ps"]}, "cpu"), 1000, static=True)
    assert _legend(both.to_dict()) == ["trainer", "sparse_ps"]


def test_every_contents_link_has_its_section_heading():
    nav = contents(SECTIONS)
    targets = re.findall(r'href="#([^"]+)"', nav)
    ids = [re.search(r'<h2 id="([^"]+)"', heading(key, title)).group(1) for key, title in SECTIONS]
    assert targets == ids and len(set(ids)) == len(SECTIONS)
    assert ">Recommendations</a>" in nav and ">Calibration</a>" in nav

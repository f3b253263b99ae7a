"""The fleet report: every analysis as Altair charts in one self-contained offline HTML file (Vega inlined
once), and every chart also as PNG and SVG. Inputs are aggregated tables of the lake and small model
evaluations, never raw samples: the report's size and build time stay flat as the fleet grows."""

from __future__ import annotations

import datetime as dt
import html
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import altair as alt
import polars as pl

from dashboards import charts
from pipelines.lib import lake
from pipelines.lib.contracts import contract
from pipelines.lib.paths import DataHome

TEMPLATE = Path(__file__).resolve().parent / "report_template.html"
RUN_EXPLORER_MAX = 600  # runs in the linked scatter: the latest ones, so the report stays flat


@dataclass
class ReportInputs:
    """Everything the report shows, already aggregated (small frames)."""

    util_distribution: pl.DataFrame
    server_count_hist: pl.DataFrame
    recommendations: pl.DataFrame
    trainer_vs_ps: pl.DataFrame
    daily: pl.DataFrame
    runs_explorer: pl.DataFrame
    sweeps: pl.DataFrame
    placements: pl.DataFrame
    calibration: pl.DataFrame
    header: dict[str, str] = field(default_factory=dict)


@dataclass
class ReportArtifacts:
    html: Path
    pngs: list[Path]
    svgs: list[Path]


def _between(frame: pl.DataFrame, first: str | None, last: str | None) -> pl.DataFrame:
    if "day" not in frame.columns or frame.is_empty():
        return frame
    if first:
        frame = frame.filter(pl.col("day") >= dt.date.fromisoformat(first))
    if last:
        frame = frame.filter(pl.col("day") <= dt.date.fromisoformat(last))
    return frame


def model_views() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """What-if sweeps (test suite), placement comparison and the calibration table, from the workload model."""
    from synthetic_fleet.calibration import evaluate, load_targets, predict, suite_row, system
    from synthetic_fleet.catalog import load_hardware, load_models
    from synthetic_fleet.model import DEFAULT

    hw, models = load_hardware(), load_models()
    grid = {
        "dense features": ("dense", (64, 128, 256, 512, 1024, 2048, 4096)),
        "sparse features": ("sparse", (4, 8, 16, 32, 64, 128)),
        "batch size": ("batch", (50, 200, 800, 3200, 12800, 51200)),
        "rows per table": ("hash_size", (100_000, 1_000_000, 10_000_000, 25_000_000)),
        "MLP width": ("width", (16, 64, 256, 1024, 2048)),
    }
    rows, meta = [], []
    for label, (key, values) in grid.items():
        for v in values:
            for platform in ("cpu", "big_basin", "zion"):
                kw = {"dense": 512, "sparse": 32}
                kw[key] = v
                rows.append(suite_row(platform, kw.pop("dense"), kw.pop("sparse"), **kw))
                if platform == "zion":
                    rows[-1]["placement"] = "system_memory"
                meta.append((label, float(v)))
    p = predict(rows, hw, DEFAULT).select("platform", "throughput_eps", "bottleneck")
    sweeps = p.with_columns(
        pl.Series("field", [m[0] for m in meta]), pl.Series("value", [m[1] for m in meta])
    )
    prow = [
        system(
            models[m],
            p_,
            pl_,
            n_sparse_ps=(models[m].cpu_baseline or {}).get("n_sparse_ps", 4) if pl_ == "remote_ps" else 0,
        )
        for m in ("M1prod", "M2prod", "M3prod")
        for p_ in ("big_basin", "zion")
        for pl_ in ("gpu_hbm", "system_memory", "hybrid", "remote_ps")
    ]
    placements = predict(prow, hw, DEFAULT).select(
        "model_name", "platform", "placement", "throughput_eps", "bottleneck", "fits"
    )
    results = evaluate(DEFAULT, hw, models)
    targets = load_targets()
    cal = pl.DataFrame(
        [
            {
                "id": r.id,
                "label": f"{r.id} {r.description[:48]}",
                "status": "PASS" if r.passed else "FAIL",
                "expected": r.expected,
                "value_text": r.value,
                "target": targets[r.id].get("value"),
                "low": targets[r.id]["value"] - targets[r.id]["tol"] if "value" in targets[r.id] else None,
                "high": targets[r.id]["value"] + targets[r.id]["tol"] if "value" in targets[r.id] else None,
                "model": float(r.value) if "value" in targets[r.id] else None,
            }
            for r in results
        ],
        schema_overrides={"target": pl.Float64, "low": pl.Float64, "high": pl.Float64, "model": pl.Float64},
    )
    return sweeps, placements, cal


def gather(home: DataHome, first: str | None = None, last: str | None = None) -> ReportInputs:
    """Read the aggregated tables (day range optional) and evaluate the model views."""
    dist = _between(lake.read_table(home, "util_distribution"), first, last)
    hist = _between(lake.read_table(home, "server_count_hist"), first, last)
    runs = _between(lake.read_table(home, "runs"), first, last)
    ledger = _between(lake.read_table(home, "ingest_ledger"), first, last)
    stats = _between(lake.read_table(home, "run_role_stats"), first, last)
    recs = lake.read_table(home, "recommendations")
    tvp = lake.read_table(home, "trainer_vs_ps")
    daily = (
        runs.group_by("day", pl.col("model_name").fill_null("(unknown)"))
        .agg(pl.len().alias("runs"), pl.col("throughput_eps").median().alias("median_throughput_eps"))
        .join(ledger.group_by("day").agg(pl.col("rows_quarantined").sum()), on="day", how="left")
        .with_columns(pl.col("rows_quarantined").fill_null(0))
        .sort("day")
    )
    cpu_means = (
        stats.filter((pl.col("resource") == "cpu") & pl.col("role").is_in(["trainer", "sparse_ps"]))
        .group_by("run_id")
        .agg(
            pl.col("mean_util").filter(pl.col("role") == "trainer").first().alias("trainer_cpu"),
            pl.col("mean_util").filter(pl.col("role") == "sparse_ps").first().alias("ps_cpu"),
        )
    )
    explorer = (
        runs.sort("start_ts", descending=True, nulls_last=True)
        .head(RUN_EXPLORER_MAX)
        .join(cpu_means, on="run_id")
        .filter(pl.col("ps_cpu").is_not_null())
        .select(
            "run_id",
            "model_name",
            "platform",
            "n_trainers",
            "n_sparse_ps",
            "throughput_eps",
            "trainer_cpu",
            "ps_cpu",
        )
        .with_columns(
            pl.format(
                "{}  {}  {} trainers / {} PS  {} ex/s",
                "run_id",
                "model_name",
                "n_trainers",
                "n_sparse_ps",
                pl.col("throughput_eps").round(0).cast(pl.Int64),
            ).alias("line")
        )
    )
    sweeps, placements, cal = model_views()
    days = sorted(runs["day"].unique().to_list()) if runs.height else []
    last_ingest = ledger["ingested_at"].max() if ledger.height else None
    header = {
        "fleet": f"{runs.height:,} runs, {int(ledger.filter(pl.col('table_name') == 'utilisation_samples')['rows_accepted'].sum()):,} samples, "
        f"{int(ledger['rows_quarantined'].sum()) if ledger.height else 0:,} rows quarantined",
        "date range": f"{days[0]} .. {days[-1]} ({len(days)} days)" if days else "no data",
        "data freshness": f"last ingest {last_ingest:%Y-%m-%d %H:%M} UTC"
        if last_ingest
        else "never ingested",
        "platforms": ", ".join(sorted(set(runs["platform"].drop_nulls().to_list()))) or "-",
    }
    return ReportInputs(dist, hist, recs, tvp, daily, explorer, sweeps, placements, cal, header)


def build_charts(inputs: ReportInputs) -> dict[str, alt.TopLevelMixin]:
    """Every chart of the report, by file name; sections without data are left out."""
    n_bins = int(contract("util_distribution").parameters["n_bins"])
    out: dict[str, alt.TopLevelMixin] = {}
    if inputs.util_distribution.filter(pl.col("platform") == "cpu").height:
        out["trainer_vs_ps"] = charts.trainer_vs_ps(inputs.util_distribution, n_bins)
    if inputs.server_count_hist.height:
        out["server_counts"] = charts.server_counts(inputs.server_count_hist)
    if inputs.recommendations.height:
        out["hardware_fit"] = charts.fit_matrix(inputs.recommendations)
    out["whatif_sweeps"] = charts.whatif_sweeps(inputs.sweeps)
    out["placements"] = charts.placement_comparison(inputs.placements)
    out["calibration"] = charts.calibration(inputs.calibration)
    if inputs.daily.height:
        out["fleet_trends"] = charts.trends(inputs.daily)
    if inputs.runs_explorer.height:
        out["run_explorer"] = charts.run_explorer(inputs.runs_explorer)
    return out


def _table(frame: pl.DataFrame, columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(f'{v:,.3g}' if isinstance(v, float) else str(v))}</td>" for v in rec)
        + "</tr>"
        for rec in frame.select(columns).iter_rows()
    )  # small aggregated tables
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cards(recs: pl.DataFrame) -> str:
    if recs.is_empty():
        return "<p>No recommendations yet.</p>"
    best = recs.filter(pl.col("recommended")).sort("model_name", "objective")
    cards = []
    for r in best.iter_rows(named=True):  # one card per model and objective
        cards.append(
            f'<div class="card"><h3>{html.escape(r["model_name"])} &middot; {html.escape(r["objective"].replace("_", " "))}</h3>'
            f'<p class="choice">{html.escape(r["platform"])} / {html.escape(r["placement"])}</p>'
            f"<p>{r['p50_throughput_eps']:,.0f} examples/s (P10-P90 {r['p10_throughput_eps']:,.0f}-{r['p90_throughput_eps']:,.0f}), "
            f"{r['eps_per_w']:.1f} examples/s/W</p><p><b>Bottleneck:</b> {html.escape(r['bottleneck'] or '-')}</p>"
            f'<p class="why">{html.escape(r["explanation"])}</p><p class="note">{html.escape(r["basis"])}'
            + (f"; held-out error {r['cv_mdape']:.1%}" if r["cv_mdape"] is not None else "")
            + "</p></div>"
        )
    return '<div class="cards">' + "".join(cards) + "</div>"


SECTIONS = (
    ("recommendation cards", None),
    ("hardware_fit", "Hardware fit"),
    ("trainer_vs_ps", "Trainers vs parameter servers"),
    ("server_counts", "Servers per run"),
    ("run_explorer", "Runs"),
    ("fleet_trends", "Fleet over days"),
    ("whatif_sweeps", "What-if sweeps"),
    ("placements", "Placements"),
    ("calibration", "Calibration"),
)


# json.dumps already escapes non-ASCII (U+2028/2029 included); these three are what HTML parsing sees.
_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def script_json(value: object) -> str:
    """JSON safe to embed in an inline <script>: data (a model name, say) can never close the element.

    ``<``, ``>`` and ``&`` become JSON unicode escapes, which parse back to the same string.
    """
    return json.dumps(value).translate(_SCRIPT_UNSAFE)


def render_html(inputs: ReportInputs, specs: dict[str, dict], files: dict[str, tuple[str, str]]) -> str:
    """One HTML document: the Vega bundle inlined once, a vegaEmbed per chart, links to its PNG and SVG."""
    import vl_convert

    blocks, calls = [], []
    for key, title in SECTIONS:
        if key == "recommendation cards":
            blocks.append(f"<h2>Recommendations</h2>{_cards(inputs.recommendations)}")
            continue
        if key not in specs:
            continue
        png, svg = files[key]
        blocks.append(
            f'<h2>{html.escape(title)}</h2><div class="chart" id="chart-{key}"></div>'
            f'<p class="files">Also as <a href="{html.escape(png)}">PNG</a> and <a href="{html.escape(svg)}">SVG</a>.</p>'
        )
        if key == "calibration":
            blocks.append(_table(inputs.calibration, ["id", "status", "expected", "value_text"]))
        calls.append(
            f"vegaEmbed('#chart-{key}', {script_json(specs[key])}, {{renderer: 'svg', actions: false}})"
            ".catch(function (e) { document.getElementById('chart-"
            + key
            + "').textContent = 'chart failed: ' + e; "
            "console.error(e); });"
        )
    bundle = vl_convert.javascript_bundle()
    return TEMPLATE.read_text(encoding="utf-8").format(
        header="".join(
            f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in inputs.header.items()
        ),
        generated=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        body="\n".join(blocks),
        bundle=bundle.replace("</script", "<\\/script"),
        calls="\n".join(calls),
    )


def _atomic_write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    (tmp.write_text(data, encoding="utf-8") if isinstance(data, str) else tmp.write_bytes(data))
    os.replace(tmp, path)


def write_report(
    home: DataHome, out_dir: Path, first: str | None = None, last: str | None = None
) -> ReportArtifacts:
    """Build the report into ``out_dir``: fleet_report.html and charts/<name>.png|.svg."""
    import vl_convert

    inputs = gather(home, first, last)
    built = build_charts(inputs)
    specs, files, pngs, svgs = {}, {}, [], []
    for name, chart in built.items():
        spec = chart.to_dict()
        specs[name] = spec
        png, svg = out_dir / "charts" / f"{name}.png", out_dir / "charts" / f"{name}.svg"
        _atomic_write(png, vl_convert.vegalite_to_png(spec, scale=1.5))
        _atomic_write(svg, vl_convert.vegalite_to_svg(spec))
        pngs.append(png)
        svgs.append(svg)
        files[name] = (f"charts/{name}.png", f"charts/{name}.svg")
    target = out_dir / "fleet_report.html"
    _atomic_write(target, render_html(inputs, specs, files))
    return ReportArtifacts(target, pngs, svgs)

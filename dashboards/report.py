"""The fleet report: every analysis as Altair charts in one self-contained offline HTML file (Vega inlined
once), and every chart also as PNG and SVG. Inputs are aggregated tables of the lake and small model
evaluations, never raw samples: the report's size and build time stay flat as the fleet grows."""

from __future__ import annotations

import datetime as dt
import html
import json
from dataclasses import dataclass, field
from pathlib import Path

import altair as alt
import polars as pl

from dashboards import charts
from pipelines.lib import cache, fileio, lake
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
    table_iii: pl.DataFrame  # the paper's Table III setting, from the workload model (as the calibration)
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


def model_views() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """What-if sweeps (test suite), placement comparison, calibration table and the paper's Table III
    setting (each production model's CPU baseline against one Big Basin), from the workload model."""
    from synthetic_fleet.calibration import (
        evaluate,
        load_targets,
        predict,
        production_ratios,
        suite_row,
        system,
    )
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
    prod = production_ratios(models, hw, DEFAULT)
    table_iii = pl.DataFrame(
        [
            {
                "model_name": m,
                "cpu_setup": f"{v['cpu']['n_trainers']} trainers + {v['cpu']['n_sparse_ps']} sparse PS + "
                f"{v['cpu']['n_dense_ps']} dense PS",
                "big_basin_placement": v["bb"]["placement"],
                "throughput_ratio": v["thr"],
                "perf_per_watt_ratio": v["ppw"],
            }
            for m, v in prod.items()
        ]
    )
    return sweeps, placements, cal, table_iii


def _count(n: pl.Expr, noun: str) -> pl.Expr:
    return pl.format(
        "{} {}", n.fill_null(0), pl.when(n == 1).then(pl.lit(noun)).otherwise(pl.lit(noun + "s"))
    )


def explorer_line() -> pl.Expr:
    """One line per run for the selected-runs list; a run without a throughput (failed) says so."""
    throughput = (
        pl.when(pl.col("throughput_eps").is_null())
        .then(pl.lit("no throughput (failed)"))
        .otherwise(pl.format("{} ex/s", pl.col("throughput_eps").round(0).cast(pl.Int64)))
    )
    return pl.concat_str(
        [
            pl.col("run_id"),
            pl.col("model_name").fill_null("(unknown model)"),
            pl.concat_str(
                [_count(pl.col("n_trainers"), "trainer"), _count(pl.col("n_sparse_ps"), "PS")],
                separator=" / ",
            ),
            throughput,
        ],
        separator="  ",
    )


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
        runs.group_by("day", pl.col("model_name").fill_null("(unknown)"), "platform")
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
        .with_columns(explorer_line().alias("line"))
    )
    views = cache.package_frames(  # the model's views change only with its code and built-in catalogs
        "model_views",
        cache.code_version("synthetic_fleet", "dashboards"),
        lambda: dict(zip(("sweeps", "placements", "calibration", "table_iii"), model_views(), strict=True)),
    )
    sweeps, placements, cal = views["sweeps"], views["placements"], views["calibration"]
    days = sorted(runs["day"].unique().to_list()) if runs.height else []
    last_ingest = ledger["ingested_at"].max() if ledger.height else None
    n_samples = int(ledger.filter(pl.col("table_name") == "utilisation_samples")["rows_accepted"].sum())
    header = {
        "fleet": f"{runs.height:,} runs, {n_samples:,} samples, "
        f"{int(ledger['rows_quarantined'].sum()) if ledger.height else 0:,} rows quarantined",
        "date range": f"{days[0]} .. {days[-1]} ({len(days)} days)" if days else "no data",
        "data freshness": f"last ingest {last_ingest:%Y-%m-%d %H:%M} UTC"
        if last_ingest
        else "never ingested",
        "platforms": ", ".join(sorted(set(runs["platform"].drop_nulls().to_list()))) or "-",
    }
    return ReportInputs(
        dist, hist, recs, tvp, daily, explorer, sweeps, placements, cal, views["table_iii"], header
    )


TABLE_III = ("cpu", "big_basin")  # the paper's Table III compares these two


def build_charts(inputs: ReportInputs, static: bool = False) -> dict[str, alt.TopLevelMixin]:
    """Every chart of the report, by file name; sections without data are left out (``NO_DATA`` says why).
    ``static``: the PNG/SVG exports, where selector charts show every model or platform as small multiples."""
    n_bins = int(contract("util_distribution").parameters["n_bins"])
    out: dict[str, alt.TopLevelMixin] = {}
    if inputs.recommendations.height:
        out["hardware_fit"] = charts.fit_matrix(inputs.recommendations)
        if set(TABLE_III) <= set(charts.best_per_platform(inputs.recommendations, TABLE_III)["platform"]):
            out["cpu_vs_big_basin"] = charts.cpu_vs_big_basin(inputs.recommendations)
    if inputs.util_distribution.filter(pl.col("platform") == "cpu").height:
        out["trainer_vs_ps"] = charts.trainer_vs_ps(inputs.util_distribution, n_bins, static=static)
    if inputs.server_count_hist.filter(pl.col("n_servers") > 0).height:
        out["server_counts"] = charts.server_counts(inputs.server_count_hist, static=static)
    if inputs.runs_explorer.height:
        out["run_explorer"] = charts.run_explorer(inputs.runs_explorer)
    if inputs.daily.height:
        out["fleet_trends"] = charts.trends(inputs.daily)
    out["whatif_sweeps"] = charts.whatif_sweeps(inputs.sweeps)
    out["placements"] = charts.placement_comparison(inputs.placements)
    out["calibration"] = charts.calibration(inputs.calibration)
    return out


def _table(frame: pl.DataFrame, columns: dict[str, str]) -> str:
    head = "".join(f"<th>{html.escape(title)}</th>" for title in columns.values())
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(f'{v:,.3g}' if isinstance(v, float) else str(v))}</td>" for v in rec)
        + "</tr>"
        for rec in frame.select(list(columns)).iter_rows()
    )  # small aggregated tables
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _card(r: dict, heading: str, note: str = "") -> str:
    return (
        f'<div class="card"><h3>{html.escape(heading)}</h3>'
        f'<p class="choice">{html.escape(r["platform"])} / {html.escape(r["placement"])}</p>'
        f"<p>{r['p50_throughput_eps']:,.0f} examples/s "
        f"(P10-P90 {r['p10_throughput_eps']:,.0f}-{r['p90_throughput_eps']:,.0f}), "
        f"{r['eps_per_w']:.1f} examples/s/W</p>"
        f"<p><b>Bottleneck:</b> {html.escape(r['bottleneck'] or '-')}</p>"
        f'<p class="why">{html.escape(r["explanation"])}</p>'
        + (f'<p class="note">{html.escape(note)}</p>' if note else "")
        + f'<p class="note">{html.escape(r["basis"])}'
        + (f"; held-out error {r['cv_mdape']:.1%}" if r["cv_mdape"] is not None else "")
        + "</p></div>"
    )


def _cards(recs: pl.DataFrame) -> str:
    if recs.is_empty():
        return "<p>No recommendations yet: they need runs in the lake (`fleet run`).</p>"
    best = recs.filter(pl.col("recommended")).sort("model_name", "objective")
    cards = [  # one card per model and objective
        _card(r, f"{r['model_name']} · {r['objective'].replace('_', ' ')}")
        for r in best.iter_rows(named=True)
    ]
    return '<div class="cards">' + "".join(cards) + "</div>"


def _table_iii_cards(recs: pl.DataFrame, paper: pl.DataFrame) -> str:
    """Per model, the better of its best CPU-cluster and best Big Basin options as the fleet runs them
    (throughput), beside the paper's own setting (the calibration's figures), saying what differs."""
    best = charts.best_per_platform(recs, TABLE_III)
    rows = best.sort("p50_throughput_eps", descending=True).group_by("model_name", maintain_order=True)
    setting = {r["model_name"]: r for r in paper.iter_rows(named=True)}
    cards = []
    for (model,), options in sorted(rows, key=lambda g: g[0]):
        top = options.row(0, named=True)
        by = {r["platform"]: r for r in options.iter_rows(named=True)}
        heading = f"{model} · CPU cluster or Big Basin"
        note = ""
        if set(TABLE_III) <= set(by):
            bb, cpu = by["big_basin"], by["cpu"]
            heading += f" ({bb['p50_throughput_eps'] / cpu['p50_throughput_eps']:.2f}x Big Basin over CPU)"
            note = (
                f"As the fleet runs it: a CPU cluster of {cpu['n_trainers']} trainers, {cpu['n_sparse_ps']} "
                f"sparse PS and {cpu['n_dense_ps']} dense PS (sized by what binds) against Big Basin with "
                f"{bb['placement']}."
            )
        if model in setting:
            p = setting[model]
            note += (
                f" In the paper's Table III setting ({p['cpu_setup']} against one Big Basin with "
                f"{p['big_basin_placement']}, the calibration table's t1-t5) Big Basin is "
                f"{p['throughput_ratio']:.2f}x the throughput and {p['perf_per_watt_ratio']:.2f}x the "
                "perf/W: the setting differs, so the ratio does."
            )
        cards.append(_card(top, heading, note))
    return '<div class="cards">' + "".join(cards) + "</div>"


SECTIONS = (
    ("recommendation cards", "Recommendations (every platform in the catalog)"),
    ("cpu_vs_big_basin", "CPU cluster vs Big Basin (the paper's Table III setting)"),
    ("hardware_fit", "Hardware fit"),
    ("trainer_vs_ps", "Trainers vs parameter servers"),
    ("server_counts", "Servers per run"),
    ("run_explorer", "Runs"),
    ("fleet_trends", "Fleet over days"),
    ("whatif_sweeps", "What-if sweeps"),
    ("placements", "Placements"),
    ("calibration", "Calibration"),
)
NO_DATA = {
    "cpu_vs_big_basin": "Needs recommendations with fitting options on both CPU clusters and Big Basin.",
    "hardware_fit": "No recommendations yet: they need runs in the lake (`fleet run`).",
    "trainer_vs_ps": "No utilisation samples of CPU-cluster runs in these days.",
    "server_counts": "No runs with server counts in these days.",
    "run_explorer": "No runs with both trainer and sparse-PS CPU utilisation in these days.",
    "fleet_trends": "No runs in these days.",
}
NOTES = {
    "hardware_fit": charts.FIT_NOTE,
    "server_counts": "Starts on CPU clusters, where trainer and parameter-server counts vary; "
    "the PNG and SVG show every platform.",
    "trainer_vs_ps": "The PNG and SVG show every model.",
}


# json.dumps already escapes non-ASCII (U+2028/2029 included); these three are what HTML parsing sees.
_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def script_json(value: object) -> str:
    """JSON safe to embed in an inline <script>: data (a model name, say) can never close the element.

    ``<``, ``>`` and ``&`` become JSON unicode escapes, which parse back to the same string.
    """
    return json.dumps(value).translate(_SCRIPT_UNSAFE)


def render_html(
    home: DataHome, inputs: ReportInputs, specs: dict[str, dict], files: dict[str, tuple[str, str]]
) -> str:
    """One HTML document: the Vega bundle inlined once, a vegaEmbed per chart, links to its PNG and SVG."""
    import vl_convert

    blocks, calls = [], []
    for key, title in SECTIONS:
        heading = f"<h2>{html.escape(title)}</h2>"
        if key == "recommendation cards":
            blocks.append(heading + _cards(inputs.recommendations))
            continue
        if key not in specs:
            blocks.append(f'{heading}<p class="nodata">{html.escape(NO_DATA.get(key, "No data."))}</p>')
            continue
        png, svg = files[key]
        if key == "cpu_vs_big_basin":
            heading += _table_iii_cards(inputs.recommendations, inputs.table_iii)
        note = f'<p class="note">{html.escape(NOTES[key])}</p>' if key in NOTES else ""
        blocks.append(
            f'{heading}<div class="chart" id="chart-{key}"></div>{note}'
            f'<p class="files">Also as <a href="{html.escape(png)}">PNG</a> and '
            f'<a href="{html.escape(svg)}">SVG</a>.</p>'
        )
        if key == "calibration":
            blocks.append(
                _table(
                    inputs.calibration,
                    {"id": "id", "status": "status", "expected": "paper", "value_text": "model"},
                )
            )
        calls.append(
            f"vegaEmbed('#chart-{key}', {script_json(specs[key])}, {{renderer: 'svg', actions: false}})"
            ".catch(function (e) { document.getElementById('chart-"
            + key
            + "').textContent = 'chart failed: ' + e; "
            "console.error(e); });"
        )
    bundle = cache.package_text("vega_bundle", vl_convert.__version__, vl_convert.javascript_bundle)
    return TEMPLATE.read_text(encoding="utf-8").format(
        header="".join(
            f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in inputs.header.items()
        ),
        generated=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        body="\n".join(blocks),
        bundle=bundle.replace("</script", "<\\/script"),
        calls="\n".join(calls),
    )


def write_report(
    home: DataHome, out_dir: Path, first: str | None = None, last: str | None = None
) -> ReportArtifacts:
    """Build the report into ``out_dir``: fleet_report.html and charts/<name>.png|.svg."""
    import vl_convert

    inputs = gather(home, first, last)
    built, exported = build_charts(inputs), build_charts(inputs, static=True)
    specs, files, pngs, svgs = {}, {}, [], []
    for name, chart in built.items():
        specs[name] = chart.to_dict()
        static = exported[name].to_dict()
        png, svg = out_dir / "charts" / f"{name}.png", out_dir / "charts" / f"{name}.svg"
        drawing = vl_convert.vegalite_to_svg(static)
        fileio.write_text(svg, drawing)
        # the PNG rasterises that SVG: the same bytes as vegalite_to_png, without running Vega again
        fileio.write_bytes(png, vl_convert.svg_to_png(drawing, scale=1.5))
        pngs.append(png)
        svgs.append(svg)
        files[name] = (f"charts/{name}.png", f"charts/{name}.svg")
    target = out_dir / "fleet_report.html"
    fileio.write_text(target, render_html(home, inputs, specs, files))
    return ReportArtifacts(target, pngs, svgs)

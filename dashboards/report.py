"""The fleet report: every analysis as Altair charts in one self-contained offline HTML file (Vega inlined
once), and every chart also as PNG and SVG. Inputs are aggregated tables of the lake and small model
evaluations, never raw samples: the report's size and build time stay flat as the fleet grows."""

from __future__ import annotations

import datetime as dt
import html
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import altair as alt
import polars as pl

from dashboards import charts
from dashboards.cards import TABLE_III, cards, table_iii_cards, why_no_recommendations
from dashboards.fit_charts import FIT_NOTE, best_per_platform, cpu_vs_big_basin, fit_matrix
from dashboards.model_views import model_views
from dashboards.report_html import contents, heading, table, waste_runs, waste_summary
from dashboards.vega_render import Renderers
from pipelines.lib import fileio
from pipelines.lib.contracts import contract, resources
from pipelines.lib.ingest.volume import failing
from pipelines.lib.paths import DataHome
from pipelines.lib.storage import cache, lake

TEMPLATE = Path(__file__).resolve().parent / "report_template.html"
SCRIPT = Path(__file__).resolve().parent / "report.js"  # the page's logic: chart widths, date-range control
RUN_EXPLORER_MAX = 600  # runs in the linked scatter: the latest of each day, so the report stays flat
MAX_DAYS = 31  # days with runs the report holds (the latest of the range): its size stays flat over time
MAX_MODELS = 12  # model families drawn by name (those with the most runs); the others as one
OTHER_MODELS = "(other models)"


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
    days: list[str] = field(default_factory=list)  # the days with runs the report covers (date-range control)
    run_efficiency: pl.DataFrame = field(default_factory=lambda: contract("run_efficiency").empty_frame())
    server_outliers: pl.DataFrame = field(default_factory=lambda: contract("server_outliers").empty_frame())
    named_models: list[str] | None = None  # the families drawn by name (None: all); see MAX_MODELS
    no_recommendations: str = ""  # why there are none, when there are none


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


def _count(n: pl.Expr, noun: str) -> pl.Expr:
    return pl.format(
        "{} {}", n.fill_null(0), pl.when(n == 1).then(pl.lit(noun)).otherwise(pl.lit(noun + "s"))
    )


def explorer_line() -> pl.Expr:
    """One line per run for the selected-runs list. A run without a throughput says why only as its status
    does: telemetry (a CSV without throughput, every Prometheus run) records none for runs that succeeded."""
    status = pl.col("status")
    missing = (
        pl.when(status.is_in(["failed", "cancelled"]))
        .then(pl.format("no throughput ({})", status))
        .when(status == "running")
        .then(pl.lit("no throughput yet (running)"))
        .otherwise(pl.lit("no throughput recorded"))
    )
    throughput = (
        pl.when(pl.col("throughput_eps").is_null())
        .then(missing)
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


def _volume_line(volume: pl.DataFrame, shown: int = 3) -> str:
    """The header's data check: days and sources whose samples did not all arrive (table sample_volume)."""
    bad = failing(volume).sort("day", "source")
    judged = volume.filter(pl.col("status") != "not_judged")
    if not bad.height:
        return (
            f"yes, for every run ({judged['day'].n_unique()} days checked)"
            if judged.height
            else "not checked"
        )
    listed = "; ".join(f"{d}: {m}" for d, m in bad.select("day", "message").head(shown).iter_rows())
    more = f" (and {bad.height - shown} more)" if bad.height > shown else ""
    return f"NO on {bad['day'].n_unique()} day(s): {listed}{more}"


def days_with_runs(home: DataHome, first: str | None = None, last: str | None = None) -> list[str]:
    """The days of ``first`` .. ``last`` (default: all) with runs in the lake."""
    days = _between(lake.read_table(home, "runs").select("day"), first, last)["day"].unique().sort()
    return [d.isoformat() for d in days.to_list()]


def _spans(runs: pl.DataFrame) -> str:
    """The date range of each source's runs ("pai 2020-02-20 .. 2020-03-12 (8 days); synthetic ...")."""
    spans = (
        runs.group_by("source")
        .agg(
            pl.col("day").min().alias("a"),
            pl.col("day").max().alias("b"),
            pl.col("day").n_unique().alias("n"),
        )
        .sort("source")
    )
    return "; ".join(
        f"{src} {a} .. {b} ({n} day{'s' if n != 1 else ''})" for src, a, b, n in spans.iter_rows()
    )


def _named_models(runs: pl.DataFrame) -> list[str] | None:
    """The MAX_MODELS model families with the most runs (then by name), or None when there are no more."""
    counts = runs.group_by("model_name").len()
    if counts.height <= MAX_MODELS:
        return None
    busiest = counts.sort(["len", "model_name"], descending=[True, False]).head(MAX_MODELS)
    return busiest["model_name"].to_list()


def fewer_models(frame: pl.DataFrame, named: list[str] | None) -> pl.DataFrame:
    """``frame`` with every model family not in ``named`` as OTHER_MODELS (None: every family named)."""
    if named is None or "model_name" not in frame.columns:
        return frame
    return frame.with_columns(
        pl.when(pl.col("model_name").is_in(named))
        .then(pl.col("model_name"))
        .otherwise(pl.lit(OTHER_MODELS))
        .alias("model_name")
    )


def _explorer(runs: pl.DataFrame, stats: pl.DataFrame, n_days: int) -> pl.DataFrame:
    """The run explorer's runs: each with its trainers' and sparse PS's mean CPU, the latest of every day."""
    cpu_means = (
        stats.filter((pl.col("resource") == "cpu") & pl.col("role").is_in(["trainer", "sparse_ps"]))
        .group_by("run_id")
        .agg(
            pl.col("mean_util").filter(pl.col("role") == "trainer").first().alias("trainer_cpu"),
            pl.col("mean_util").filter(pl.col("role") == "sparse_ps").first().alias("ps_cpu"),
        )
    )
    return (
        runs.join(cpu_means, on="run_id")
        .filter(pl.col("ps_cpu").is_not_null())
        .sort("start_ts", descending=True, nulls_last=True)
        # every day keeps its latest runs, so any date range has runs to explore
        .filter(pl.int_range(pl.len()).over("day") < max(RUN_EXPLORER_MAX // max(n_days, 1), 10))
        .select(
            "run_id",
            "day",
            "model_name",
            "platform",
            "n_trainers",
            "n_sparse_ps",
            "throughput_eps",
            "status",
            "trainer_cpu",
            "ps_cpu",
        )
        .with_columns(explorer_line().alias("line"))
    )


def gather(home: DataHome, first: str | None = None, last: str | None = None) -> ReportInputs:
    """Read the aggregated tables of the latest MAX_DAYS days with runs in ``first`` .. ``last`` (default:
    the whole lake) and evaluate the model views."""
    in_range = days_with_runs(home, first, last)
    days = in_range[-MAX_DAYS:]
    if days:
        first, last = days[0], days[-1]
    dist = _between(lake.read_table(home, "util_distribution"), first, last)
    hist = _between(lake.read_table(home, "server_count_hist"), first, last)
    runs = _between(lake.read_table(home, "runs"), first, last).with_columns(
        pl.col("model_name").fill_null(charts.UNKNOWN_MODEL)
    )
    # a fleet of thousands of model families (a name per run) is drawn as its busiest families and the rest
    named = _named_models(runs)
    in_range_runs = runs
    n_runs, n_families = runs.height, runs["model_name"].n_unique()
    runs, dist = fewer_models(runs, named), fewer_models(dist, named)
    ledger = _between(lake.read_table(home, "ingest_ledger"), first, last)
    volume = _between(lake.read_table(home, "sample_volume"), first, last)
    stats = _between(lake.read_table(home, "run_role_stats"), first, last)
    recs = lake.read_table(home, "recommendations")
    if named is not None:
        recs = recs.filter(pl.col("model_name").is_in(named))
    tvp = lake.read_table(home, "trainer_vs_ps")
    daily = (
        runs.group_by("day", "model_name", "platform")
        .agg(pl.len().alias("runs"), pl.col("throughput_eps").median().alias("median_throughput_eps"))
        .join(ledger.group_by("day").agg(pl.col("rows_quarantined").sum()), on="day", how="left")
        .with_columns(pl.col("rows_quarantined").fill_null(0))
        .sort("day")
    )
    explorer = _explorer(runs, stats, len(days))
    views = cache.package_frames(  # the model's views change only with its code and built-in catalogs
        "model_views",
        cache.code_version("workload_model", "synthetic_fleet", "dashboards"),
        lambda: dict(zip(("sweeps", "placements", "calibration", "table_iii"), model_views(), strict=True)),
    )
    sweeps, placements, cal = views["sweeps"], views["placements"], views["calibration"]
    last_ingest = ledger["ingested_at"].max() if ledger.height else None
    n_samples = int(ledger.filter(pl.col("table_name") == "utilisation_samples")["rows_accepted"].sum())
    header = {
        "fleet": f"{n_runs:,} runs, {n_samples:,} samples, "
        f"{int(ledger['rows_quarantined'].sum()) if ledger.height else 0:,} rows quarantined",
        "date range": _spans(runs) if runs.height else "no data",
        "data freshness": f"last ingest {last_ingest:%Y-%m-%d %H:%M} UTC"
        if last_ingest
        else "never ingested",
        "platforms": ", ".join(sorted(set(runs["platform"].drop_nulls().to_list()))) or "-",
        "samples arrived": _volume_line(volume),
    }
    if named is not None:
        header["model families"] = (
            f"{n_families:,}: the {MAX_MODELS} with the most runs are drawn by name and in the hardware fit, "
            f"the others as {OTHER_MODELS}; every family's recommendations are in the recommendations table "
            "(`fleet sql`)"
        )
    if len(in_range) > len(days):
        header["days shown"] = (
            f"the latest {len(days)} of {len(in_range)} days with runs ({in_range[0]} .. {in_range[-1]}); "
            "`fleet report --from D --to D` reports earlier days"
        )
    return ReportInputs(
        dist,
        hist,
        recs,
        tvp,
        daily,
        explorer,
        sweeps,
        placements,
        cal,
        views["table_iii"],
        header,
        days,
        _between(lake.read_table(home, "run_efficiency"), first, last),
        _between(lake.read_table(home, "server_outliers"), first, last),
        named,
        "" if recs.height else why_no_recommendations(in_range_runs),
    )


def gpu_platforms(dist: pl.DataFrame) -> tuple[str, ...]:
    """Platforms whose servers reported a GPU resource (a contract resource named gpu*), sorted."""
    gpu = [r for r in resources() if r.startswith("gpu")]
    found = dist.filter(pl.col("resource").is_in(gpu))["platform"].unique().sort().to_list()
    return tuple(found)


def build_charts(
    inputs: ReportInputs, static: bool = False, page: Mapping[str, alt.TopLevelMixin] | None = None
) -> dict[str, alt.TopLevelMixin]:
    """Every chart of the report, by file name; sections without data are left out (``NO_DATA`` says why).
    ``static``: the PNG/SVG exports, where selector charts show every model or platform as small multiples;
    ``page``: the page's charts; those without a selector or a day range are taken from it as they are."""

    def same(name: str, draw) -> alt.TopLevelMixin:
        return draw() if page is None else page[name]

    n_bins = int(contract("util_distribution").parameters["n_bins"])
    days = None if static else inputs.days  # the exports show every day; the page has the range control
    out: dict[str, alt.TopLevelMixin] = {}
    if inputs.recommendations.height:
        out["hardware_fit"] = same("hardware_fit", lambda: fit_matrix(inputs.recommendations))
        if set(TABLE_III) <= set(best_per_platform(inputs.recommendations, TABLE_III)["platform"]):
            out["cpu_vs_big_basin"] = same(
                "cpu_vs_big_basin", lambda: cpu_vs_big_basin(inputs.recommendations)
            )
    if inputs.util_distribution.filter(pl.col("platform") == "cpu").height:
        out["trainer_vs_ps"] = charts.trainer_vs_ps(inputs.util_distribution, n_bins, static, days)
    gpu = gpu_platforms(inputs.util_distribution)
    if gpu:
        out["trainer_vs_ps_gpu"] = charts.trainer_vs_ps(
            inputs.util_distribution,
            n_bins,
            static,
            days,
            platforms=gpu,
            title="Trainers vs sparse parameter servers on GPU platforms, every GPU resource",
        )
    if inputs.server_count_hist.filter(pl.col("n_servers") > 0).height:
        out["server_counts"] = charts.server_counts(inputs.server_count_hist, static, days)
    if inputs.runs_explorer.height:
        out["run_explorer"] = charts.run_explorer(inputs.runs_explorer, days)
    if inputs.daily.height:
        out["fleet_trends"] = charts.trends(inputs.daily, days)
    if inputs.run_efficiency["right_sized_servers"].is_not_null().any():
        out["waste"] = charts.waste(fewer_models(inputs.run_efficiency, inputs.named_models), days)
    out["whatif_sweeps"] = same("whatif_sweeps", lambda: charts.whatif_sweeps(inputs.sweeps))
    out["placements"] = same("placements", lambda: charts.placement_comparison(inputs.placements))
    out["calibration"] = same("calibration", lambda: charts.calibration(inputs.calibration))
    return out


SECTIONS = (
    ("recommendation cards", "Recommendations (every platform in the catalog)"),
    ("cpu_vs_big_basin", "CPU cluster vs Big Basin (the paper's Table III setting)"),
    ("hardware_fit", "Hardware fit"),
    ("trainer_vs_ps", "Trainers vs parameter servers"),
    ("trainer_vs_ps_gpu", "Trainers vs parameter servers on GPU platforms"),
    ("server_counts", "Servers per run"),
    ("waste", "Where the fleet wastes machines"),
    ("run_explorer", "Runs"),
    ("fleet_trends", "Fleet over days"),
    ("whatif_sweeps", "What-if sweeps"),
    ("placements", "Placements"),
    ("calibration", "Calibration"),
)
NO_DATA = {
    "cpu_vs_big_basin": "Needs recommendations with fitting options on both CPU clusters and Big Basin.",
    "trainer_vs_ps": "No utilisation samples of CPU-cluster runs in these days.",
    "trainer_vs_ps_gpu": "No GPU utilisation samples in these days.",
    "server_counts": "No runs with server counts in these days.",
    "run_explorer": "No runs with both trainer and sparse-PS CPU utilisation in these days.",
    "fleet_trends": "No runs in these days.",
    "waste": "No right-sized runs in these days: right-sizing needs utilisation samples (`fleet run`).",
}
NOTES = {
    "hardware_fit": FIT_NOTE,
    "server_counts": "Starts on CPU clusters, where trainer and parameter-server counts vary; "
    "the PNG and SVG show every platform.",
    "trainer_vs_ps": "The PNG and SVG show every model.",
    "trainer_vs_ps_gpu": "One model and platform at a time; every GPU resource the trainers reported (GPU, "
    "GPU memory, tensor-core activity, NVLink and PCIe where the exporter measures them). The PNG and SVG "
    "show every model.",
    "waste": "Right-sized: the fewest servers of a role that keep every resource's p95 utilisation at or "
    "under the target without losing throughput (docs/how-to/right-sizing.md). kW: peak power of the servers "
    "freed.",
}
# The width (px) the charts are drawn for: the content width of a 1024 px window. The page scales every
# chart's views to the width it has (wider windows get wider charts; labels and legends keep their size).
DESIGN_WIDTH = 960


# json.dumps already escapes non-ASCII (U+2028/2029 included); these three are what HTML parsing sees.
_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def script_json(value: object) -> str:
    """JSON safe to embed in an inline <script>: data (a model name, say) can never close the element.

    ``<``, ``>`` and ``&`` become JSON unicode escapes, which parse back to the same string.
    """
    return json.dumps(value).translate(_SCRIPT_UNSAFE)


def _notes(inputs: ReportInputs) -> dict[str, str]:
    """The note under each chart; what depends on the data is said here."""
    notes = dict(NOTES)
    silent = charts.platforms_without_throughput(inputs.daily)
    if silent:
        notes["fleet_trends"] = (
            f"No throughput panel for {', '.join(silent)}: their runs report no throughput "
            "(public traces such as the Alibaba PAI trace do not publish it)."
        )
    return notes


# Above the calibration chart: what an analyst reads in it (the table under it lists every check).
CALIBRATION_INTRO = (
    "Each row sets one figure of the paper beside the workload model's prediction of it: the dot is the "
    "prediction divided by the paper's value (1 is an exact match) and the grey band its tolerance, so a dot "
    "within the band (green, PASS) means the model reproduces that figure of the paper and one outside it "
    "(red, FAIL) means it does not."
)
RANGED_NOTE = (
    "The charts with days follow the date range above; the header, the recommendations, these totals "
    "and the tables cover every day of the report ({first} .. {last})."
)


def _section(
    key: str, title: str, inputs: ReportInputs, specs: dict[str, dict], files: dict, notes: dict[str, str]
) -> str:
    """One section of the page: its heading (linked from the contents), its chart or why it has none, and
    what it says beside the chart."""
    head = heading(key, title)
    if key == "recommendation cards":
        return head + cards(inputs.recommendations, inputs.no_recommendations)
    if key == "calibration":
        head += f"<p>{html.escape(CALIBRATION_INTRO)}</p>"
    if key == "waste" and inputs.days:
        ranged = RANGED_NOTE.format(first=inputs.days[0], last=inputs.days[-1])
        head += f'<p class="note">{html.escape(ranged)}</p>'
    if key == "waste":
        head += waste_summary(inputs.run_efficiency, inputs.server_outliers)
    if key not in specs:
        why = inputs.no_recommendations if key == "hardware_fit" else NO_DATA.get(key, "No data.")
        return f'{head}<p class="nodata">{html.escape(why)}</p>'
    png, svg = files[key]
    if key == "cpu_vs_big_basin":
        head += table_iii_cards(inputs.recommendations, inputs.table_iii)
    note = f'<p class="note">{html.escape(notes[key])}</p>' if key in notes else ""
    blocks = [
        f'{head}<div class="chart" id="chart-{key}"></div>{note}'
        f'<p class="files">Also as <a href="{html.escape(png)}">PNG</a> and '
        f'<a href="{html.escape(svg)}">SVG</a>.</p>'
    ]
    if key == "waste":
        blocks.append(waste_runs(inputs.run_efficiency, inputs.server_outliers))
    if key == "calibration":
        columns = {"id": "id", "status": "status", "expected": "paper", "value_text": "model"}
        blocks.append(table(inputs.calibration, columns))
    return "\n".join(blocks)


def render_html(
    home: DataHome, inputs: ReportInputs, specs: dict[str, dict], files: dict[str, tuple[str, str]]
) -> str:
    """One HTML document: a table of contents, the Vega bundle inlined once, the chart specs once, a
    date-range control over the charts that have days, links to every chart's PNG and SVG."""
    import vl_convert

    notes = _notes(inputs)
    blocks = [contents(SECTIONS)]
    blocks += [_section(key, title, inputs, specs, files, notes) for key, title in SECTIONS]
    bundle = cache.package_text("vega_bundle", vl_convert.__version__, vl_convert.javascript_bundle)
    ranged = [
        k
        for k, spec in specs.items()
        if any(p.get("name") == charts.DAY_FROM for p in spec.get("params", []))
    ]
    return TEMPLATE.read_text(encoding="utf-8").format(
        header="".join(
            f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in inputs.header.items()
        ),
        generated=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        body="\n".join(blocks),
        bundle=bundle.replace("</script", "<\\/script"),
        specs=script_json(specs),
        days=script_json(inputs.days),
        ranged=script_json(ranged),
        design_width=DESIGN_WIDTH,
        script=SCRIPT.read_text(encoding="utf-8").replace("</script", "<\\/script"),
    )


def write_report(
    home: DataHome, out_dir: Path, first: str | None = None, last: str | None = None
) -> ReportArtifacts:
    """Build the report into ``out_dir``: fleet_report.html and charts/<name>.png|.svg."""
    with Renderers() as renderers:  # they start now, beside the queries and the chart building
        inputs = gather(home, first, last)
        built = build_charts(inputs)
        exported = build_charts(inputs, static=True, page=built)
        specs, files, pngs, svgs = {}, {}, [], []
        for name, chart in built.items():
            # Altair's schema validation was a fifth of the report's time; the specs come from fixed code, and
            # a test validates every chart of both renderings (tests/e2e/test_report_views.py)
            specs[name] = chart.to_dict(validate=False)
            png, svg = out_dir / "charts" / f"{name}.png", out_dir / "charts" / f"{name}.svg"
            renderers.submit(name, exported[name].to_dict(validate=False), svg, png)
            pngs.append(png)
            svgs.append(svg)
            files[name] = (f"charts/{name}.png", f"charts/{name}.svg")
        page = render_html(home, inputs, specs, files)
        renderers.wait()
    target = out_dir / "fleet_report.html"
    fileio.write_text(target, page)
    return ReportArtifacts(target, pngs, svgs)

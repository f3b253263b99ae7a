"""The report as a user sees it in Chromium at 1024 px, on a fleet with a public-trace platform (not one of
the built-in three) and a hostile model name: no script injected, every chart drawn, colours from the data,
one legend per heatmap metric, the CPU-vs-Big-Basin view, no sideways scroll, no "null" in the runs list."""

import json
import re

import polars as pl
import pytest

from pipelines.lib.ingest import adapters
from synthetic_fleet.sampler import DayFleet, sample_day
from synthetic_fleet.writers import write_day
from tests.support.browser import dump_dom, probe_result, with_probe
from tests.support.homes import DAY, PAI_SLICE

XSS = "M1prod</script><script>window.__xss=1</script>"
PROBE = """<script>
setTimeout(function () {
  var svgs = Array.prototype.slice.call(document.querySelectorAll('svg.marks'));
  var out = {scroll: document.documentElement.scrollWidth, inner: window.innerWidth, xss: window.__xss || 0,
             svgs: svgs.length, right: Math.max.apply(null, svgs.map(function (s) {
               return s.getBoundingClientRect().right; }))};
  var p = document.createElement('pre'); p.id = 'probe'; p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
}, 15000);
</script></body>"""


@pytest.fixture(scope="module")
def views_home(tmp_path_factory, hw, models, night):
    from pipelines.lib.paths import DataHome

    tmp = tmp_path_factory.mktemp("views")
    home = DataHome.resolve(tmp / "home")
    day = sample_day(DAY, 60, 7, hw, models)
    runs = day.runs.with_columns(
        pl.when(pl.col("model_name") == "M1prod")
        .then(pl.lit(XSS))
        .otherwise(pl.col("model_name"))
        .alias("model_name")
    )
    assert runs.filter(pl.col("status") == "failed").height  # the runs list must show a failed run
    write_day(DayFleet(DAY, runs, day.samples), home.landing, source="synthetic", fmt="jsonl")
    pai_days = adapters.deliver(adapters.adapt_pai(PAI_SLICE), home)
    night(home, [DAY, *pai_days])
    return home


@pytest.fixture(scope="module")
def report(views_home, chromium, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("probe")
    page = views_home.report_path.read_text()
    probe = with_probe(page, PROBE, tmp / "probe.html")
    dom = dump_dom(chromium, probe.as_uri(), tmp / "profile", width=1024, budget_ms=30000)
    return page, dom.stdout, probe_result(dom)


def test_every_chart_is_a_valid_vega_lite_spec(views_home):
    # The nightly report serialises its charts without Altair's schema validation (a second of a night):
    # every chart of both renderings, on a fleet that draws them all, is validated here instead.
    from dashboards.report import build_charts, gather

    inputs = gather(views_home)
    for static in (False, True):
        built = build_charts(inputs, static=static)
        assert len(built) >= 9
        for name, chart in built.items():
            assert chart.to_dict() == chart.to_dict(validate=False), name


def _section(dom: str, key: str) -> str:
    start = dom.index(f'id="chart-{key}"')
    return dom[start : dom.index('class="files"', start)]


def test_hostile_model_name_runs_no_script_and_every_chart_draws(report):
    page, dom, probe = report
    assert XSS not in page  # escaped in the embedded JSON and in the cards
    assert probe["xss"] == 0
    assert probe["svgs"] == len(re.findall(r'<div class="chart" id="chart-', page)) >= 9
    assert "chart failed" not in re.sub(r"<script.*?</script>", "", dom, flags=re.S)


def test_platform_colours_come_from_the_data(report):
    page, dom, _ = report
    server_counts = _section(dom, "server_counts")
    assert "pai_" in page and re.search(r"<option[^>]*>pai_t4</option>", server_counts)
    assert re.search(r'<option value="cpu" selected', server_counts) or re.search(
        r"<option[^>]*selected[^>]*>cpu<", server_counts
    )  # the CPU cluster first
    bars = re.findall(r'<path[^>]*aria-roledescription="bar"[^>]*fill="([^"]+)"', server_counts)
    bars += re.findall(r'<path[^>]*fill="([^"]+)"[^>]*aria-roledescription="bar"', server_counts)
    assert bars and all(f not in ("transparent", "none", "") for f in bars)
    specs = json.loads(re.search(r"var SPECS = (\{.*?\});\nvar DAYS", page, re.S).group(1))
    domain = json.dumps(specs["server_counts"])
    assert "pai_t4" in domain and "zion" in domain


def test_one_legend_per_heatmap_metric(report):
    _, dom, _ = report
    fit = _section(dom, "hardware_fit")
    legends = re.findall(r'class="mark-group role-legend"', fit)
    assert len(legends) == 2
    assert "examples/s per W" in fit and ">examples/s<" in fit


def test_cpu_vs_big_basin_view_is_present(report):
    page, dom, _ = report
    assert "CPU cluster vs Big Basin" in page and 'id="chart-cpu_vs_big_basin"' in page
    assert re.search(r'<svg[^>]*class="marks"', _section(dom, "cpu_vs_big_basin"))


def test_no_sideways_scroll_at_1024_px(report):
    _, _, probe = report
    assert probe["scroll"] <= probe["inner"] == 1024
    assert probe["right"] <= 1024


def test_runs_list_has_no_null_and_counts_the_selection(report):
    _, dom, _ = report
    explorer = _section(dom, "run_explorer")
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", explorer)
    assert texts and not [t for t in texts if "null" in t]
    assert any(t.endswith("runs selected") for t in texts)
    assert not [t for t in texts if re.search(r"\b1 trainers\b", t)]

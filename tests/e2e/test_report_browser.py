"""The exported report renders in headless Chromium with no network: every chart drawn, no console errors,
and a screenshot that is not blank; on a fleet whose telemetry records no throughput, the runs list calls
failed only the run that failed, and the table of contents takes a reader to every section (issue 44)."""

import json
import re

import polars as pl
import pytest
from PIL import Image, ImageStat

from pipelines.lib.storage import lake
from synthetic_fleet.sampler import DayFleet, sample_day
from synthetic_fleet.writers import write_day
from tests.support.browser import FLAGS, dump_dom, probe_result, with_probe
from tests.support.cli import run
from tests.support.homes import DAY


def test_report_renders_every_chart_offline(materialized_home, chromium, tmp_path):
    home, *_ = materialized_home
    page = home.report_path.read_text()
    expected = len(re.findall(r'<div class="chart" id="chart-', page))
    assert expected >= 7
    url = home.report_path.as_uri()
    dom = run(
        [
            chromium,
            *FLAGS,
            f"--user-data-dir={tmp_path / 'p1'}",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=20000",
            "--dump-dom",
            url,
        ],
        timeout=180,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    console = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln]
    assert not [ln for ln in console if re.search(r"error|uncaught|failed", ln, re.I)], console
    rendered = len(re.findall(r'<svg[^>]*class="marks"', html))
    assert rendered == expected, f"{rendered} of {expected} charts rendered"
    assert "chart failed" not in re.sub(r"<script.*?</script>", "", html, flags=re.S)
    assert "Recommendations" in html and 'class="card"' in html and "data freshness" in html
    shot = tmp_path / "report.png"
    s = run(
        [
            chromium,
            *FLAGS,
            f"--user-data-dir={tmp_path / 'p2'}",
            "--window-size=1400,3000",
            "--virtual-time-budget=20000",
            f"--screenshot={shot}",
            url,
        ],
        timeout=180,
    )
    assert s.returncode == 0 and shot.exists()
    stat = ImageStat.Stat(Image.open(shot).convert("L"))
    assert stat.stddev[0] > 20, f"screenshot looks blank (pixel stddev {stat.stddev[0]:.1f})"


# After the charts are drawn: the runs list's lines, then every contents link followed as a reader clicks it
# (where its target lands, and the sticky date-range bar's bottom edge).
PROBE = """<script>
window.fleetReportReady.then(function () { setTimeout(function () {
  var out = {lines: Array.prototype.map.call(document.querySelectorAll('#chart-run_explorer svg text'),
                                             function (t) { return t.textContent; }),
             headings: document.querySelectorAll('h2').length, links: []};
  var links = Array.prototype.slice.call(document.querySelectorAll('#contents a'));
  function follow(i) {
    if (i === links.length) {
      var p = document.createElement('pre'); p.id = 'probe'; p.textContent = JSON.stringify(out);
      document.body.appendChild(p);
      return;
    }
    var id = links[i].getAttribute('href').slice(1);
    links[i].click();
    setTimeout(function () {
      var target = document.getElementById(id);
      out.links.push({id: id, tag: target ? target.tagName : null,
                      top: target ? Math.round(target.getBoundingClientRect().top) : null,
                      bar: Math.round(document.getElementById('range').getBoundingClientRect().bottom),
                      height: window.innerHeight});
      follow(i + 1);
    }, 100);
  }
  follow(0);
}, 500); });
</script></body>"""


@pytest.fixture(scope="module")
def telemetry_report(tmp_path_factory, chromium, hw, models, night):
    """A fleet whose CPU-cluster runs came from telemetry without throughput (as a CSV without it, or every
    Prometheus run), the latest of them failed; the report and its probe in Chromium."""
    from pipelines.lib.paths import DataHome

    tmp = tmp_path_factory.mktemp("telemetry_report")
    home = DataHome.resolve(tmp / "home")
    day = sample_day(DAY, 24, 5, hw, models)
    cpu = pl.col("platform") == "cpu"
    latest = cpu & (pl.col("start_ts") == pl.col("start_ts").filter(cpu).max())
    runs = day.runs.with_columns(
        pl.when(cpu).then(None).otherwise(pl.col("throughput_eps")).alias("throughput_eps"),
        pl.when(latest).then(pl.lit("failed")).otherwise(pl.col("status")).alias("status"),
    )
    write_day(DayFleet(DAY, runs, day.samples), home.landing, source="synthetic", fmt="jsonl")
    night(home, [DAY])
    page = home.report_path.read_text()
    probe = with_probe(page, PROBE, tmp / "probe.html")
    dom = dump_dom(chromium, probe.as_uri(), tmp / "profile", width=1024, budget_ms=40000)
    console = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln]
    assert not [ln for ln in console if re.search(r"error|uncaught|failed", ln, re.I)], console
    return lake.read_table(home, "runs"), page, probe_result(dom)


def test_a_succeeded_run_without_throughput_is_not_called_failed(telemetry_report):
    runs, page, probe = telemetry_report
    status = dict(runs.select("run_id", "status").iter_rows())
    listed = {line.split("  ")[0]: line for line in probe["lines"] if re.match(r"\d{8}-\d{5}  ", line)}
    silent = runs.filter(pl.col("throughput_eps").is_null())
    shown = {r: line for r, line in listed.items() if r in set(silent["run_id"].to_list())}
    assert [r for r in shown if status[r] == "succeeded"] and [r for r in shown if status[r] == "failed"]
    for run_id, line in shown.items():
        if status[run_id] == "succeeded":
            assert line.endswith("  no throughput recorded") and "failed" not in line, line
        else:
            assert line.endswith("  no throughput (failed)"), line
    # the page's data says the same of every run it holds, listed or not
    specs = json.loads(re.search(r"var SPECS = (\{.*?\});\nvar DAYS", page, re.S).group(1))
    rows = [r for data in specs["run_explorer"]["datasets"].values() for r in data]
    assert rows and all(
        ("failed" in r["line"]) == (status[r["run_id"]] == "failed")
        for r in rows
        if r["throughput_eps"] is None
    )


def test_the_contents_link_every_section_and_land_clear_of_the_range_bar(telemetry_report):
    _, page, probe = telemetry_report
    links = probe["links"]
    assert len(links) == probe["headings"] >= 12  # a link per section
    assert len({link["id"] for link in links}) == len(links)
    for link in links:
        assert link["tag"] == "H2", link  # the target exists: the section's heading
        assert link["bar"] <= link["top"] < link["height"], link  # in view, not under the sticky bar
    assert page.index('<nav id="contents"') < page.index("<h2")  # near the top, before every section

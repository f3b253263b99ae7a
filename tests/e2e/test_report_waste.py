"""The report's "Where the fleet wastes machines" section in headless Chromium at 1024 and 1440 px, on a fleet
with a synthetic day (right-sized from its telemetry) and the PAI trace slice (no utilisation: not judged):
totals, the chart drawn, the top runs with their evidence, no sideways scroll."""

import re

import pytest

from pipelines.lib.ingest import adapters
from pipelines.lib.storage import lake
from synthetic_fleet.sampler import sample_day
from synthetic_fleet.writers import write_day
from tests.support.browser import dump_dom, probe_result, with_probe
from tests.support.homes import DAY, PAI_SLICE

PROBE = """<script>
setTimeout(function () {
  var chart = document.getElementById('chart-waste');
  var table = document.querySelector('div.waste table');
  var out = {scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
             svgs: chart ? chart.querySelectorAll('svg.marks').length : 0,
             chart_right: chart ? chart.getBoundingClientRect().right : 0,
             table_right: table ? table.getBoundingClientRect().right : 0,
             rows: table ? table.querySelectorAll('tbody tr').length : 0};
  var p = document.createElement('pre'); p.id = 'probe'; p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
}, 15000);
</script></body>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory, chromium, hw, models, night):
    from pipelines.lib.paths import DataHome

    tmp = tmp_path_factory.mktemp("waste_report")
    home = DataHome.resolve(tmp / "home")
    write_day(sample_day(DAY, 30, 2021, hw, models), home.landing, source="synthetic", fmt="jsonl")
    pai_days = adapters.deliver(adapters.adapt_pai(PAI_SLICE), home)
    night(home, [DAY, *pai_days])
    page = home.report_path.read_text()
    probe = with_probe(page, PROBE, tmp / "probe.html")
    doms = {}
    for width in (1024, 1440):
        dom = dump_dom(chromium, probe.as_uri(), tmp / f"profile-{width}", width=width, budget_ms=30000)
        doms[width] = (dom.stdout, probe_result(dom))
    return home, page, doms


def _section(html: str) -> str:
    start = html.index("Where the fleet wastes machines</h2>")
    return html[start : html.index("<h2>", start)]


@pytest.mark.parametrize("width", [1024, 1440])
def test_waste_section_renders_its_chart_and_runs_without_sideways_scroll(report, width):
    _, _, doms = report
    dom, probe = doms[width]
    assert probe["svgs"] == 1 and probe["rows"] >= 5
    assert probe["scroll"] <= probe["inner"] == width
    assert probe["chart_right"] <= width and probe["table_right"] <= width
    section = _section(dom)
    assert "chart failed" not in section
    assert re.search(r'<svg[^>]*class="marks"', section)
    assert "Servers recoverable per day" in section and "sparse_ps" in section


def test_waste_section_states_totals_evidence_and_the_public_trace_not_judged(report):
    home, page, _ = report
    section = _section(page)
    eff = lake.read_table(home, "run_efficiency")
    recoverable = int(eff["servers_recoverable"].sum())
    assert f"{recoverable:,} servers (" in section and "kW of provisioned power to win back" in section
    pai_ps = int(eff.filter((eff["source"] == "pai") & (eff["role"] == "sparse_ps"))["n_servers"].sum())
    assert (
        pai_ps > 0 and f"pai: {pai_ps:,} held, none judged; {pai_ps:,} without utilisation samples" in section
    )
    assert "synthetic:" in section and "called oversized" in section and "Fig. 5" in section
    assert "hot_shard x" in section and "for " in section and " min" in section  # how far off, how long
    assert (home.reports / "charts" / "waste.png").exists() and (
        home.reports / "charts" / "waste.svg"
    ).exists()

"""The report as an operator and a planner see it in headless Chromium at 1024 and 1440 px, on a fleet of two
synthetic days and the PAI trace slice (a public trace: its own platforms, no model names, no throughput):
one colour per model everywhere, no empty throughput panels, a date range per source, heatmap cells that say
why they have no value, cards and charts that use the width, a runs list inside its box, sweep axes without
"1.024k", and the date-range control (pick a range: the charts change, nothing breaks, all offline)."""

import json
import re

import pytest

from dashboards import charts
from pipelines.lib.ingest import adapters
from synthetic_fleet.sampler import sample_day
from synthetic_fleet.writers import write_day
from tests.support.browser import dump_dom, probe_result, with_probe
from tests.support.homes import PAI_SLICE

DAYS = ("2026-11-20", "2026-11-21")
# Collects what a person would look at, then picks the last synthetic day with the range control (as a person
# would: the "from" select, a change event) and looks again.
PROBE = """<script>
function look() {
  var out = {scroll: document.documentElement.scrollWidth, inner: window.innerWidth, charts: {}, texts: {},
             marks: {}};
  document.querySelectorAll('div.chart').forEach(function (el) {
    var svg = el.querySelector('svg.marks');
    var box = el.parentElement.getBoundingClientRect();
    var r = svg ? svg.getBoundingClientRect() : {left: 0, right: 0, width: 0};
    out.charts[el.id.replace('chart-', '')] = {section: Math.round(box.width), width: Math.round(r.width),
                                                right: Math.round(r.right)};
    out.texts[el.id.replace('chart-', '')] = Array.prototype.map.call(el.querySelectorAll('svg text'),
      function (t) { var b = t.getBoundingClientRect();
                     return [t.textContent, Math.round(b.left), Math.round(b.right)]; });
    out.marks[el.id.replace('chart-', '')] = Array.prototype.map.call(
      el.querySelectorAll('g.mark-text.role-mark text'), function (t) { return t.textContent; });
  });
  var grid = document.querySelectorAll('.cards')[0];
  var cards = Array.prototype.slice.call(grid.querySelectorAll('.card'));
  out.cards = cards.length;
  out.card_columns = getComputedStyle(grid).gridTemplateColumns.split(' ').length;
  out.first_row_cards = cards.filter(function (c) { return c.offsetTop === cards[0].offsetTop; }).length;
  out.cards_right = Math.max.apply(null, cards.map(function (c) { return c.getBoundingClientRect().right; }));
  out.runs_bars = document.querySelectorAll('#chart-fleet_trends path[aria-roledescription="bar"]').length;
  out.status = document.getElementById('range-status').textContent;
  return out;
}
window.fleetReportReady.then(function () { setTimeout(function () {
  var before = look();
  var from = document.getElementById('day-from');
  from.value = DAYS[DAYS.length - 1];
  from.dispatchEvent(new Event('change'));
  setTimeout(function () {
    var p = document.createElement('pre'); p.id = 'probe';
    p.textContent = JSON.stringify({before: before, after: look(), last: DAYS[DAYS.length - 1]});
    document.body.appendChild(p);
  }, 1500);
}, 500); });
</script></body>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory, chromium, hw, models, night):
    from pipelines.lib.paths import DataHome

    tmp = tmp_path_factory.mktemp("report_ui")
    home = DataHome.resolve(tmp / "home")
    for i, day in enumerate(DAYS):
        write_day(sample_day(day, 40, 3 + i, hw, models), home.landing, source="synthetic", fmt="jsonl")
    pai_days = adapters.deliver(adapters.adapt_pai(PAI_SLICE), home)
    night(home, [*DAYS, *pai_days])
    page = home.report_path.read_text()
    probe = with_probe(page, PROBE, tmp / "probe.html")
    seen = {}
    for width in (1024, 1440):
        dom = dump_dom(chromium, probe.as_uri(), tmp / f"profile-{width}", width=width, budget_ms=40000)
        console = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln]
        assert not [ln for ln in console if re.search(r"error|uncaught|failed", ln, re.I)], console
        seen[width] = (dom.stdout, probe_result(dom))
    return home, page, seen


def _specs(page: str) -> dict:
    return json.loads(re.search(r"var SPECS = (\{.*?\});\nvar DAYS", page, re.S).group(1))


def _scales(spec, out=None) -> list[dict]:
    """Every colour scale with an explicit domain in a spec."""
    out = [] if out is None else out
    if isinstance(spec, dict):
        scale = spec.get("scale")
        if isinstance(scale, dict) and "domain" in scale and "range" in scale:
            out.append(scale)
        for v in spec.values():
            _scales(v, out)
    elif isinstance(spec, list):
        for v in spec:
            _scales(v, out)
    return out


def test_one_colour_per_model_everywhere(report):
    _, page, _ = report
    specs = _specs(page)
    seen = {}
    for key in ("fleet_trends", "run_explorer"):
        for scale in _scales(specs[key]):
            for name, colour in zip(scale["domain"], scale["range"], strict=True):
                if name in charts.MODEL_COLORS:
                    seen.setdefault(name, set()).add(colour)
    assert {"M1prod", charts.UNKNOWN_MODEL} <= set(seen)
    assert all(colours == {charts.MODEL_COLORS[n]} for n, colours in seen.items()), seen


def test_no_empty_throughput_panels_and_a_range_per_source(report):
    _, page, seen = report
    dom, probe = seen[1024]
    titles = [t for t, *_ in probe["before"]["texts"]["fleet_trends"] if t.startswith("Median throughput")]
    assert titles and not [t for t in titles if "pai_" in t]
    assert re.search(r"No throughput panel for pai_\w+.*: their runs report no throughput", page)
    header = re.search(r'<ul id="header">(.*?)</ul>', page, re.S).group(1)
    assert re.search(
        r"pai 2020-\d\d-\d\d \.\. 2020-\d\d-\d\d \(\d+ days\); synthetic 2026-11-20 \.\. 2026-11-21", header
    )


def test_every_heatmap_cell_has_a_value_or_says_why(report):
    _, _, seen = report
    texts = [t for t, *_ in seen[1024][1]["before"]["texts"]["hardware_fit"]]
    assert "= gpu_hbm" in texts  # big_basin/hybrid where the tables fit HBM
    cells = seen[1024][1]["before"]["marks"]["hardware_fit"]  # the labels drawn on the cells
    placement = r"[a-z_0-9]+/(gpu_hbm|system_memory|remote_ps|hybrid)"
    models, options = 3, len({t for t in texts if re.fullmatch(placement, t)})
    assert options >= 8 and len(cells) == 2 * models * options  # two heatmaps, every cell labelled
    assert all(re.fullmatch(r"[\d.]+[kM]?|✕ no fit|= gpu_hbm|– not ranked", t) for t in cells), cells
    assert "Blank:" not in seen[1024][0]


@pytest.mark.parametrize("width", [1024, 1440])
def test_layout_uses_the_width_and_nothing_overflows(report, width):
    _, _, seen = report
    probe = seen[width][1]["before"]
    assert probe["scroll"] <= probe["inner"] == width
    # a row of cards per 3 columns at 1024 px, 4 at 1440 (a model whose objectives agree has one card, so the
    # cards may not fill the row)
    assert probe["card_columns"] == (3 if width == 1024 else 4)
    assert probe["first_row_cards"] == min(probe["card_columns"], probe["cards"])
    assert probe["cards_right"] <= width
    for key, c in probe["charts"].items():
        assert c["width"] <= c["section"] and c["right"] <= width, (key, c)
        assert c["width"] >= 0.75 * c["section"], (key, c)  # fills the width, also at 1440 px
    # the selected-runs list stays in its chart
    listed = [t for t in probe["texts"]["run_explorer"] if re.match(r"\d{8}-\d{5} ", t[0])]
    assert listed and max(r for *_, r in listed) <= probe["charts"]["run_explorer"]["right"]


def test_small_things(report):
    home, page, seen = report
    texts = [t for key in ("whatif_sweeps",) for t, *_ in seen[1024][1]["before"]["texts"][key]]
    assert "1,024" in texts and not [t for t in texts if re.fullmatch(r"\d+\.\d+[kM]", t)]
    dom = seen[1024][0]
    assert not re.search(r"\b1 trainers\b", re.sub(r"<script.*?</script>", "", dom, flags=re.S))
    static = (home.reports / "charts" / "server_counts.svg").read_text()
    assert static.count(">Servers per run (Figs. 8-9 of the paper)<") == 1  # one title, not one per facet


def test_date_range_control_changes_the_charts(report):
    _, page, seen = report
    for width in (1024, 1440):
        dom, probe = seen[width]
        before, after = probe["before"], probe["after"]
        n_days = len(json.loads(re.search(r"var DAYS = (\[.*?\]);", page).group(1)))
        assert before["status"].startswith(f"{n_days} of {n_days} days")
        assert after["status"].startswith(f"1 of {n_days} days") and probe["last"] == DAYS[-1]
        # one bar per day in each bar panel (runs; quarantined rows when any)
        assert after["runs_bars"] in (1, 2) and before["runs_bars"] == after["runs_bars"] * n_days
        runs_selected = [
            t for c in (before, after) for t, *_ in c["texts"]["run_explorer"] if t.endswith("selected")
        ]
        assert len(runs_selected) == 2 and runs_selected[0] != runs_selected[1]
        ecdf = [before["texts"]["trainer_vs_ps"], after["texts"]["trainer_vs_ps"]]
        assert ecdf[0] and ecdf[1]  # still drawn over the one day
        assert "chart failed" not in re.sub(r"<script.*?</script>", "", dom, flags=re.S)
        assert after["scroll"] <= width

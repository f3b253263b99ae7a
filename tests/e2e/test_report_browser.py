"""The exported report renders in headless Chromium with the network closed to it (offline)."""

import re

import pytest

from tests.e2e.conftest import run
from tests.integration.test_pipeline import materialized  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         # No network at all: a report that needed a CDN would render blank.
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]


def test_report_renders_charts_offline(materialized, chromium, tmp_path):  # noqa: F811
    home, *_ = materialized
    url = home.report_path.as_uri()
    dom = run([chromium, *FLAGS, f"--user-data-dir={tmp_path / 'p1'}", "--virtual-time-budget=10000", "--dump-dom", url], timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert "Fleet telemetry report" in html and "Recommendations" in html
    # vega-embed replaced the empty container with rendered marks (SVG) and no error message.
    assert re.search(r'<svg[^>]*class="marks"[^>]*width="\d{3,}"', html), "no chart was rendered"
    assert html.count("<path") > 50
    assert "Error" not in re.sub(r"<script.*?</script>", "", html, flags=re.S)
    shot = tmp_path / "report.png"
    s = run([chromium, *FLAGS, f"--user-data-dir={tmp_path / 'p2'}", "--window-size=1300,2400",
             "--virtual-time-budget=10000", f"--screenshot={shot}", url], timeout=120)
    assert s.returncode == 0 and shot.exists()
    assert shot.stat().st_size > 60_000  # a blank page is a few KB; charts and tables are far more

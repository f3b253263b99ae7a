"""The exported report renders in headless Chromium with no network: every chart drawn, no console errors,
and a screenshot that is not blank."""

import re

from PIL import Image, ImageStat

from tests.support.browser import FLAGS
from tests.support.cli import run


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

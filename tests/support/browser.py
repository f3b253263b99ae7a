"""Headless Chromium as the tests drive it: no network at all, a fresh profile per page."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from tests.support.cli import run

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    # No network at all: a report that needed a CDN would render blank.
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def with_probe(page: str, probe: str, out: Path) -> Path:
    """``page`` with ``probe`` (a script ending in ``</body>``) before its closing body tag, in ``out``."""
    head, _, tail = page.rpartition("</body>")  # the last one: the Vega bundle's code holds the string too
    out.write_text(head + probe + tail)
    return out


def dump_dom(
    chromium: str, url: str, profile: Path, *, width: int = 1024, budget_ms: int = 30000, timeout: int = 240
) -> subprocess.CompletedProcess:
    """The page's DOM after ``budget_ms`` of virtual time at ``width`` px; console lines on stderr."""
    dom = run(
        [
            chromium,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},900",
            "--enable-logging=stderr",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            url,
        ],
        timeout=timeout,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom


def probe_result(dom: subprocess.CompletedProcess) -> dict:
    """The JSON a probe script left in ``<pre id="probe">``."""
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout)
    assert found, dom.stdout[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"'))

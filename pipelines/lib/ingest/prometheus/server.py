"""A local Prometheus over a TSDB backfilled from OpenMetrics files (Debian's `prometheus` package, which
brings `promtool`): what `fleet demo --source prometheus` and the tests pull from. Listens on 127.0.0.1
only, on a free port, and is stopped (its own process only) when the context ends."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path

INSTALL_HINT = (
    "Prometheus is not installed: `apt-get install prometheus` (Debian and Ubuntu; it brings promtool), "
    "or put prometheus and promtool from https://prometheus.io/download/ on PATH"
)
CONFIG = "global:\n  scrape_interval: 1m\n"  # no scrape targets: the TSDB holds backfilled blocks only


class PrometheusMissing(RuntimeError):
    """prometheus or promtool is not on PATH."""


def binaries() -> tuple[str, str]:
    """Paths of prometheus and promtool, or PrometheusMissing saying how to install them."""
    prom, tool = shutil.which("prometheus"), shutil.which("promtool")
    if not prom or not tool:
        raise PrometheusMissing(INSTALL_HINT)
    return prom, tool


def backfill(files: Iterable[Path], tsdb: Path) -> None:
    """Blocks in ``tsdb`` from OpenMetrics files (promtool tsdb create-blocks-from openmetrics)."""
    _, tool = binaries()
    tsdb.mkdir(parents=True, exist_ok=True)
    for f in files:
        out = subprocess.run(
            [tool, "tsdb", "create-blocks-from", "openmetrics", str(f), str(tsdb)],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(
                f"promtool could not backfill {f.name}: {(out.stderr or out.stdout).strip()[-500:]}"
            )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(tsdb: Path, work: Path, ready_s: float = 120) -> Iterator[str]:
    """A Prometheus serving ``tsdb`` on 127.0.0.1; yields its URL."""
    prom, _ = binaries()
    work.mkdir(parents=True, exist_ok=True)
    config = work / "prometheus.yml"
    config.write_text(CONFIG)
    port = _free_port()
    log = open(work / "prometheus.log", "wb")  # noqa: SIM115 (closed below, after the process)
    proc = subprocess.Popen(
        [
            prom,
            f"--config.file={config}",
            f"--storage.tsdb.path={tsdb}",
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"prometheus exited ({proc.returncode}); see {work / 'prometheus.log'}")
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"prometheus not ready after {ready_s:.0f} s; see {work / 'prometheus.log'}"
                )
            time.sleep(0.3)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()

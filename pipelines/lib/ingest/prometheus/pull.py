"""Pull raw samples from a Prometheus server's HTTP API into landing files, a day at a time, paged by time.

Raw samples, never resampled: every page is an instant query of a range selector (``metric[page]`` at the
page's end), which returns the samples as scraped; ``query_range`` would repeat a value across a scrape gap
for up to the lookback (5 minutes) and turn gaps into flat lines. Each response is streamed to disk as it
arrives (memory stays at a copy buffer) and becomes a landing file,
``landing/<source>/<day>/<metric>-<page start>.prom.json``, read by the prometheus_json reader like any
delivered export, so the ledger, quarantine and idempotence hold for pulled data too. Pulling a day again
replaces its pulled files (files no longer pulled are removed), and the day is then ingested whole.

A run belongs to the day it started. The day's jobs are found first (one query: each training pod's first
and last kube_pod_labels sample, at the mapping's interval, over the day and max_run_hours around it); the
exporters are then read from the day's start to the end of its last job, kube-state-metrics from
max_run_hours before the day (so a job that started the day before is recognised as such).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.lib import fileio
from pipelines.lib.ingest.prometheus.mapping import PromMapping, ksm_label
from pipelines.lib.paths import DataHome

PULLED_SUFFIX = ".prom.json"
KSM = ("pod_labels", "pod_info", "pod_phase", "node_labels")


class PullError(RuntimeError):
    """The server could not be read (unreachable, or it answered an error); the message says which."""


@dataclass
class DayPull:
    """What one day's pull wrote."""

    day: str
    files: list[Path] = field(default_factory=list)
    jobs: int = 0
    window: tuple[dt.datetime, dt.datetime] | None = None


class Client:
    """The few calls of the HTTP API the pull needs (POST, so long selectors fit)."""

    def __init__(self, url: str, timeout_s: float = 120):
        self.base = url.rstrip("/")
        self.timeout_s = timeout_s

    def _open(self, path: str, form: dict[str, str]):
        data = urllib.parse.urlencode(form).encode()
        req = urllib.request.Request(self.base + path, data=data, method="POST")
        try:
            return urllib.request.urlopen(req, timeout=self.timeout_s)
        except urllib.error.HTTPError as exc:
            detail = exc.read(2000).decode("utf-8", "replace")
            with contextlib.suppress(ValueError, AttributeError):
                detail = json.loads(detail).get("error", detail)
            raise PullError(f"{self.base}{path}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise PullError(f"{self.base}: cannot reach the server ({getattr(exc, 'reason', exc)})") from None

    def json(self, path: str, form: dict[str, str] | None = None) -> dict:
        with self._open(path, form or {}) as resp:
            doc = json.load(resp)
        if doc.get("status") != "success":
            raise PullError(f"{self.base}{path}: {doc.get('errorType')}: {doc.get('error')}")
        return doc["data"]

    def save(self, query: str, at: float, target: Path) -> bool:
        """Stream the response of an instant query to ``target`` (atomically); False (and no file) if it
        holds no series."""
        try:
            with (
                self._open("/api/v1/query", {"query": query, "time": f"{at:.3f}"}) as resp,
                fileio.atomic_target(target) as tmp,
            ):
                with open(tmp, "wb") as out:
                    shutil.copyfileobj(resp, out, 1 << 20)
                head = tmp.read_bytes()[:4096] if tmp.stat().st_size < 4096 else b""
                if head and b'"result":[]' in head.replace(b" ", b""):
                    raise _Empty
        except _Empty:
            return False
        return True

    def major_version(self) -> int:
        try:
            version = self.json("/api/v1/status/buildinfo").get("version", "2")
        except PullError:
            return 2
        return int(version.split(".")[0] or 2)


class _Empty(Exception):
    """A page without series: not written."""


def _ts(t: dt.datetime) -> float:
    return t.timestamp()


def _pages(
    start: dt.datetime, end: dt.datetime, page: dt.timedelta
) -> Iterator[tuple[dt.datetime, dt.datetime]]:
    a = start
    while a < end:
        b = min(a + page, end)
        yield a, b
        a = b


def _range_selector(selector: str, a: dt.datetime, b: dt.datetime, inclusive: bool) -> tuple[str, float]:
    """(query, evaluation time) returning the raw samples with a <= ts < b. Prometheus 2 range selectors
    hold both ends ([T - r, T]), Prometheus 3 only the later one ((T - r, T]); timestamps are milliseconds."""
    ms = round((b - a).total_seconds() * 1000)
    if inclusive:  # [a, b - 1 ms]
        return f"{selector}[{ms - 1}ms]", _ts(b) - 0.001
    return f"{selector}[{ms}ms]", _ts(b - dt.timedelta(milliseconds=1))  # (a - 1 ms, b - 1 ms]


def selectors(mapping: PromMapping) -> dict[str, str]:
    """The PromQL selector of each metric the mapping reads (idle CPU only, counted network devices)."""
    m = mapping.metrics
    out = {kind: m[kind] for kind in m}
    out["cpu"] = f'{m["cpu"]}{{mode="idle"}}'
    exclude = mapping.nic_exclude.replace("\\", "\\\\").replace('"', '\\"')
    for kind in ("net_rx", "net_tx", "nic_speed"):
        out[kind] = f'{m[kind]}{{device!~"{exclude}"}}'
    return out


def discover(client: Client, mapping: PromMapping, day: dt.datetime, until: dt.datetime) -> dict[str, tuple]:
    """Each training job seen from max_run_hours before ``day`` to ``until``: (first, last) sample time,
    to the mapping's interval (a subquery of timestamp(kube_pod_labels))."""
    span = until - (day - dt.timedelta(hours=mapping.max_run_hours))
    step = f"{mapping.interval_s}s"
    keys = [ksm_label(k) for k in mapping.job_labels]
    sel = mapping.metrics["pod_labels"]
    found: dict[str, list[float]] = {}
    for fn in ("min_over_time", "max_over_time"):
        q = f"{fn}(timestamp({sel})[{int(span.total_seconds())}s:{step}])"
        for series in client.json("/api/v1/query", {"query": q, "time": f"{_ts(until):.3f}"})["result"]:
            labels = series["metric"]
            job = next((labels[k] for k in keys if labels.get(k)), None)
            if job is None:
                continue
            key = f"{labels.get('namespace', '')}/{job}"
            t = float(series["value"][1])
            lo, hi = found.get(key, [t, t])
            found[key] = [min(lo, t), max(hi, t)]
    return {
        k: (dt.datetime.fromtimestamp(lo, dt.UTC), dt.datetime.fromtimestamp(hi, dt.UTC))
        for k, (lo, hi) in found.items()
    }


def pull_day(
    client: Client,
    home: DataHome,
    day: str,
    mapping: PromMapping,
    *,
    source: str = "prometheus",
    page: dt.timedelta = dt.timedelta(hours=2),
    now: dt.datetime | None = None,
    inclusive: bool = True,
) -> DayPull:
    """Pull one day into landing/<source>/<day>/, replacing what an earlier pull of the day wrote."""
    start = dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC)
    now = now or dt.datetime.now(dt.UTC)
    latest = min(now, start + dt.timedelta(days=1, hours=mapping.max_run_hours))
    jobs = discover(client, mapping, start, latest)
    ours = [(lo, hi) for lo, hi in jobs.values() if start <= lo < start + dt.timedelta(days=1)]
    step = dt.timedelta(seconds=mapping.interval_s)
    end = min(latest, max([hi + 2 * step for _, hi in ours], default=start + dt.timedelta(days=1)))
    end = max(end, min(now, start + dt.timedelta(days=1)))
    folder = home.landing / source / day
    result = DayPull(day=day, jobs=len(ours), window=(start, end))
    sel = selectors(mapping)
    for kind, selector in sel.items():
        first = start - dt.timedelta(hours=mapping.max_run_hours) if kind in KSM else start
        for a, b in _pages(first, end, page):
            query, at = _range_selector(selector, a, b, inclusive)
            target = folder / f"{mapping.metrics[kind]}-{a:%Y%m%dT%H%M%S}{PULLED_SUFFIX}"
            if client.save(query, at, target):
                result.files.append(target)
    keep = set(result.files)
    for stale in folder.glob(f"*{PULLED_SUFFIX}") if folder.exists() else []:
        if stale not in keep:
            stale.unlink()
    return result

"""The Prometheus readers: OpenMetrics / Prometheus text (a vectorised tier held to the line-by-line
reference by a differential fuzzer, both agreeing with prometheus_client on real scrapes) and HTTP API
responses (streamed series by series, held to a whole-file json.loads reference)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import polars as pl
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pipelines.lib.ingest.readers import detect, openmetrics, prom_json
from pipelines.lib.ingest.readers.base import ROW, FileInfo, FileProblem, Source
from tests.support.homes import FIXTURES

TS_MS = 1795132800123  # 2026-11-20T00:00:00.123Z


def _src(path: Path) -> Source:
    return Source(path, path.name, path.name.endswith(".gz"), path.parent)


def _read(path: Path, tier: str | None = None) -> tuple[pl.DataFrame, pl.DataFrame, FileInfo]:
    """Every row and reject of a file, by one tier (or the format's read with its fallbacks)."""
    info = FileInfo()
    if tier is None:
        batches = [b for b in openmetrics.read(_src(path), None, info) if hasattr(b, "frame")]
    else:
        batches = list(openmetrics._READERS[tier](_src(path), None, info))
    rows = pl.concat([b.frame for b in batches]) if batches else pl.DataFrame()
    rejects = pl.concat([b.rejects for b in batches]) if batches else pl.DataFrame()
    return rows.sort(ROW), rejects.sort(ROW), info


def _with_timestamps(text: str) -> str:
    return "\n".join(x if not x or x.startswith("#") else f"{x} {TS_MS}" for x in text.split("\n"))


@pytest.mark.parametrize(
    "name",
    ["node_exporter_e2e/e2e-output.txt.gz", "dcgm_exporter_datadog/metrics.txt"],
)
def test_real_scrapes_parse_as_prometheus_client_parses_them(tmp_path, name):
    raw = FIXTURES / name
    text = (gzip.decompress(raw.read_bytes()) if name.endswith(".gz") else raw.read_bytes()).decode()
    path = tmp_path / "scrape.prom"
    path.write_text(_with_timestamps(text))
    want = [
        (
            s.name.removesuffix("_total"),  # the client adds _total to counter samples that lack it
            json.dumps(
                dict(sorted((k, v) for k, v in s.labels.items() if v)),
                ensure_ascii=False,
                separators=(",", ":"),
            ),
            s.value,
            s.timestamp,
        )
        for fam in text_string_to_metric_families(path.read_text())
        for s in fam.samples
    ]
    for tier in openmetrics.TIERS:
        rows, rejects, _ = _read(path, tier)
        assert rejects.height == 0
        got = [
            (m.removesuffix("_total"), lab, v, t.timestamp())
            for m, lab, v, t in rows.select("metric", "labels", "value", "ts").iter_rows()
        ]
        assert sorted(got) == sorted(want), tier
    # as delivered (a live scrape has no timestamps): every sample is refused with that reason
    path.write_text(text)
    rows, rejects, _ = _read(path)
    assert rows.height == 0 and rejects.height == len(want)
    assert set(rejects["reason_code"]) == {"missing_required"}
    assert "without a timestamp" in rejects["message"][0]


def test_types_units_escapes_and_the_end_of_file(tmp_path):
    text = (
        "# HELP http_requests_total The total.\n"
        "# TYPE http_requests counter\n"  # OpenMetrics: the family has no _total
        'http_requests_total{code="200",path="/a\\"b\\\\c\\nd",empty=""} 1027 1795132800.5\n'
        "# TYPE temp gauge\n"
        'temp 21.5 1795132801 # {trace_id="x"} 1 1795132801\n'
        "temp_total 3 1795132802\n"  # no family temp_total: temp's type (a declared family less a suffix)
        "up NaN 1795132803\n"
        "# EOF\n"
    )
    path = tmp_path / "a.om"
    path.write_text(text)
    rows, rejects, info = _read(path)
    assert rejects.height == 0 and info.tier == "polars"
    assert rows.equals(_read(path, "precise")[0])
    first = rows.row(0, named=True)
    assert first["metric"] == "http_requests_total" and first["type"] == "counter"
    assert json.loads(first["labels"]) == {"code": "200", "path": '/a"b\\c\nd'}  # empty value: absent
    assert first["ts"].isoformat() == "2026-11-20T00:00:00.500000+00:00"
    assert rows["type"].to_list() == ["counter", "gauge", "gauge", None]
    assert rows["value"].is_nan().to_list() == [False, False, False, True]
    # Prometheus text: milliseconds, no # EOF
    path = tmp_path / "a.prom"
    path.write_text("up 1 1795132800500\nup 2 1795132801000\n")
    rows, rejects, _ = _read(path)
    assert rejects.height == 0
    assert [t.isoformat() for t in rows["ts"]] == [
        "2026-11-20T00:00:00.500000+00:00",
        "2026-11-20T00:00:01+00:00",
    ]
    # a file's first timestamp sets its unit: one of the other unit lands far outside 2000..2099
    path.write_text("up 1 1795132800\nup 2 1795132801000\n# EOF\n")
    rows, _, _ = _read(path)
    assert rows["ts"].dt.year().to_list()[0] == 2026 and rows["ts"].dt.year().to_list()[1] > 2099


def test_an_openmetrics_file_cut_before_its_eof_is_truncated(tmp_path):
    path = tmp_path / "cut.om"
    path.write_text("# TYPE up gauge\nup 1 1795132800\nup 1 17951")
    for tier in openmetrics.TIERS:
        with pytest.raises(FileProblem) as exc:
            list(openmetrics._READERS[tier](_src(path), None, FileInfo()))
        assert exc.value.reason == "file_truncated"


HOSTILE = [
    'x{a="1" 1 1795132800',  # unbalanced brace
    'x{a="\\t"} 1 1795132800',  # an escape the format does not have
    'x{a="1",a="2"} 1 1795132800',  # a label twice
    'x{a="\\t",a="2"} 1 1795132800',  # both: the first bad pair decides
    "x +NaN 1795132800",
    "x 1_000 1795132800",  # Python would read it; the format does not
    "x 0x1p3 1795132800",
    "x",
    "x{} 1 1795132800",
    "x{a=1} 1 1795132800",
    "9x 1 1795132800",
    "x 1 1795132800 extra",
    "x 1 1e400",  # a timestamp no int64 holds
    "x 1",  # no timestamp
    "# TYPE x flux",  # unknown type: ignored
    "#TYPE x counter",  # not a TYPE line
    "   ",
    "\t# indented comment",
    'x{a="\u00e9\u2028\x7f",b="\\\\n"} 1 1795132800',
    'x{ a = "1" , } 2 1795132800',
    "x 1 1795132800 # {} 1",
    "x 1.5e-3 -1795132800",
    "x Infinity 1795132800.25",
    'x{__name__="y"} 1 1795132800',
    'x{a="1 2 # "} 3 1795132800',  # a value that looks like a tail: the shortest head is no head
    'x{a="} 7"} 3 1795132800 # {t="}"} 1',
]


def _valid_line(rng: random.Random) -> str:
    name = rng.choice(["node_cpu_seconds_total", "up", "DCGM_FI_DEV_GPU_UTIL", "a:b_c", "x_bucket", "x"])
    labels = {}
    for _ in range(rng.randint(0, 4)):
        key = rng.choice(["cpu", "mode", "device", "le", "UUID", "uuid", "pod", "namespace"])
        value = "".join(
            rng.choice(["a", "0", "\\\\", '\\"', "\\n", "é", " ", ",", "=", "}", "{"])
            for _ in range(rng.randint(0, 6))
        )
        labels[key] = value
    inner = ",".join(f'{k}{rng.choice(["=", " = "])}"{v}"' for k, v in labels.items())
    body = (
        f"{name}{{{inner}{rng.choice(['', ','] if inner else [''])}}}"
        if labels or rng.random() < 0.3
        else name
    )
    value = rng.choice(["0", "1", "-2.5", "1e3", "NaN", "+Inf", "-Inf", "3.14159", ".5", "7."])
    ts = rng.choice([f"{1795132800 + rng.randint(0, 86399)}", f"{1795132800 + rng.random() * 86400:.3f}"])
    sep = rng.choice([" ", "\t", "  "])
    return f"{body}{sep}{value}{sep}{ts}"


def _file(rng: random.Random, n: int, hostile_every: int) -> str:
    lines = ["\ufeff# HELP x a file"] if rng.random() < 0.5 else []
    for i in range(n):
        if i % hostile_every == 0:
            lines.append(rng.choice(HOSTILE))
        elif i % 97 == 0:
            lines.append(
                f"# TYPE {rng.choice(['x', 'up', 'node_cpu_seconds'])} {rng.choice(['counter', 'gauge'])}"
            )
        else:
            lines.append(_valid_line(rng))
        if rng.random() < 0.02:
            lines[-1] += "\r"
    if rng.random() < 0.7:  # mostly at the end; else somewhere (lines after it are bad) or missing
        lines.insert(len(lines) if rng.random() < 0.6 else rng.randint(0, len(lines)), "# EOF")
    return "\n".join(lines) + rng.choice(["\n", ""])


@pytest.mark.parametrize("seed", range(6))
def test_the_fast_tier_answers_exactly_as_the_reference(tmp_path, seed):
    rng = random.Random(seed)
    n = 100_000 if seed == 0 else 3_000
    path = tmp_path / ("f.prom.gz" if seed % 3 == 2 else "f.prom")
    text = _file(rng, n, hostile_every=rng.choice([7, 50, 997]))
    data = text.encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    fast, ref = _outcome(path, "polars"), _outcome(path, "precise")
    if isinstance(ref[0], pl.DataFrame) and isinstance(fast[0], pl.DataFrame):
        assert fast[0].equals(ref[0]) and fast[1].equals(ref[1])
        assert fast[0].height + fast[1].height > 0
    else:
        assert fast == ref  # the same whole-file verdict (reason and message)


def _outcome(path: Path, tier: str):
    try:
        rows, rejects, _ = _read(path, tier)
    except FileProblem as p:
        return p.reason, p.message
    return rows, rejects


def test_a_doubt_hands_the_file_to_the_reference(tmp_path):
    path = tmp_path / "nul.prom"
    path.write_text('x{a="\x00"} 1 1795132800000\ny 2 1795132800000\n')
    rows, rejects, info = _read(path)
    assert info.tier == "precise" and rows.height == 2 and rejects.height == 0


def test_recognised_by_name_or_by_content():
    assert detect("node.om", b"# TYPE x gauge")[0].name == "openmetrics"
    assert detect("scrape.txt", b"# HELP up whether")[0].name == "openmetrics"
    assert detect("scrape.txt", b'up{job="x"} 1 17')[0].name == "openmetrics"
    assert detect("export.json", b'{"status":"success","data"')[0].name == "prometheus_json"
    assert detect("cpu.prom.json", b"{}")[0].name == "prometheus_json"
    # a file whose name gives its table keeps its format whatever its content
    assert detect("runs.json", b'{"status":"success"', "runs")[0].name == "jsonl"
    assert detect("utilisation_samples.csv", b"# TYPE", "utilisation_samples")[0].name == "csv"


# ---------------------------------------------------------------- API responses


def _reference(doc: dict) -> tuple[list, list]:
    """The API response judged whole (json.loads): rows (row, metric, labels, us, value) and rejected rows."""
    rows, rejects, row = [], [], 1
    for element in doc["data"]["result"]:
        if not isinstance(element, dict):
            rejects.append(row)
            row += 1
            continue
        values = element.get("values", [element["value"]] if "value" in element else None)
        metric = element.get("metric")
        if values is None or not isinstance(values, list):
            rejects.append(row)
            row += 1
            continue
        ok_labels = isinstance(metric, dict) and all(isinstance(v, str) for v in metric.values())
        for pair in values:
            good = (
                ok_labels
                and isinstance(pair, list)
                and len(pair) == 2
                and type(pair[0]) in (int, float)
                and isinstance(pair[1], str)
                and prom_json._VALUE_RE.match(pair[1])
                and not prom_json._SIGNED_NAN.match(pair[1])
            )
            if good:
                labels = json.dumps(
                    {k: v for k, v in sorted(metric.items()) if k != "__name__" and v},
                    ensure_ascii=False,
                    separators=(",", ":"),
                )
                us = int((pair[0] * 1e6 + 0.5) // 1)
                rows.append((row, metric.get("__name__"), labels, us, float(pair[1])))
            else:
                rejects.append(row)
            row += 1
    return rows, rejects


def _api_doc(rng: random.Random, n_series: int) -> dict:
    result = []
    for i in range(n_series):
        metric = {
            "__name__": rng.choice(["up", "node_cpu_seconds_total", "kube_pod_info"]),
            "instance": f"10.0.0.{i}:9100",
            "empty": "",
            "é": "ü",
        }
        values = [
            [1795132800 + j * 15 + rng.choice([0, 0.5, 0.123]), rng.choice(["1", "0.25", "NaN", "+Inf"])]
            for j in range(rng.randint(0, 300))
        ]
        if rng.random() < 0.1:
            values.append(
                rng.choice([[1], ["a", "1"], [1795132800, 1], [1795132800, "x"], "ab", [True, "1"]])
            )
        if rng.random() < 0.05:
            metric["bad"] = 1
        result.append({"metric": metric, "values": values})
    if rng.random() < 0.3:
        result.insert(rng.randint(0, len(result)), 17)
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


@pytest.mark.parametrize("seed", range(4))
def test_api_responses_read_as_a_stream_give_what_the_whole_file_gives(tmp_path, seed):
    rng = random.Random(seed)
    doc = _api_doc(rng, 400 if seed else 3000)
    if seed == 1:  # another key order, pretty-printed
        doc = {"data": doc["data"], "status": "success", "warnings": ["w"]}
    text = json.dumps(doc, indent=2 if seed == 1 else None, ensure_ascii=seed != 2)
    path = tmp_path / ("r.json.gz" if seed == 3 else "r.json")
    path.write_bytes(gzip.compress(text.encode()) if seed == 3 else text.encode())
    batches = list(prom_json.read(_src(path), None, FileInfo()))
    rows = pl.concat([b.frame for b in batches]).sort(ROW)
    rejects = pl.concat([b.rejects for b in batches]).sort(ROW)
    want_rows, want_rejects = _reference(json.loads(text))
    got = [
        (r, m, lab, int(t.timestamp() * 1e6 + 0.5), v)
        for r, m, lab, t, v in rows.select(ROW, "metric", "labels", "ts", "value").iter_rows()
    ]
    assert [x[:4] for x in got] == [x[:4] for x in want_rows]
    assert all((a[4] == b[4]) or (a[4] != a[4] and b[4] != b[4]) for a, b in zip(got, want_rows, strict=True))
    assert rejects[ROW].to_list() == want_rejects


@pytest.mark.parametrize(
    "text, reason",
    [
        ('{"status":"error","errorType":"bad_data","error":"parse error at char 3"}', "file_unreadable"),
        ('{"status":"success","data":{"resultType":"scalar","result":[1795132800,"1"]}}', "file_unreadable"),
        (
            '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1',
            "file_truncated",
        ),
        ('{"status":"success","data":{"resultType":"matrix","result":[]}} trailing', "file_unreadable"),
    ],
)
def test_api_responses_that_hold_no_series_are_refused_with_the_reason(tmp_path, text, reason):
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(FileProblem) as exc:
        list(prom_json.read(_src(path), None, FileInfo()))
    assert exc.value.reason == reason
    if "bad_data" in text:
        assert "parse error at char 3" in exc.value.message

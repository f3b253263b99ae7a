"""Writes the bad-input corpus (tests/corpus/landing/) and its expectations (tests/corpus/expected.json).

The corpus is committed; this script documents how each file was made (some are binary: truncated gzip,
Latin-1 text, a broken Parquet file) and regenerates them: python tests/corpus/make_corpus.py
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
DAY = "2026-11-20"
SRC = "acme"


def run(run_id: str, **over) -> dict:
    row = {
        "run_id": run_id,
        "start_ts": f"{DAY}T01:00:00Z",
        "end_ts": f"{DAY}T03:00:00Z",
        "status": "succeeded",
        "model_name": "M1prod",
        "n_dense_features": 1024,
        "n_sparse_features": 48,
        "n_tables": 48,
        "embedding_dim": 64,
        "embedding_gb": 40.0,
        "mean_lookups_per_table": 20.0,
        "bottom_mlp": "1024-1024-512-64",
        "top_mlp": "1024-512-1",
        "interaction": "dot",
        "batch_size": 512,
        "platform": "cpu",
        "placement": "remote_ps",
        "n_trainers": 16,
        "n_sparse_ps": 4,
        "n_dense_ps": 2,
        "n_readers": 16,
        "throughput_eps": 150000.0,
        "power_w": 12000.0,
        "normalized_entropy": 0.8,
    }
    row.update(over)
    return row


def jl(rows: list) -> bytes:
    return ("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n").encode()


SAMPLE_HEADER = (
    "run_id,server_id,role,ts,cpu_util,mem_cap_util,mem_bw_util,net_bw_util,gpu_util,gpu_mem_util,power_w"
)


def sample(
    run_id="good-1", server="t0", role="trainer", ts=f"{DAY}T01:05:00Z", cpu="0.5", bw="0.2", net="0.3"
) -> str:
    return f"{run_id},{server},{role},{ts},{cpu},0.3,{bw},{net},,,250"


def build() -> dict[str, dict[int, str]]:
    """Write every file; return {file: {row_number: reason_code}} (row 0 = the whole file)."""
    files: dict[str, bytes] = {}
    expected: dict[str, dict[int, str]] = {}

    def add(name: str, data: bytes, reasons: dict[int, str] | None = None, source: str = SRC):
        rel = f"{source}/{DAY}/{name}"
        files[rel] = data
        expected[rel] = reasons or {}

    add(
        "runs.jsonl",
        jl(
            [
                run("good-1"),  # 1 accepted
                run("good-2", colour="blue", team="ads"),  # 2 accepted; extra columns kept aside
                {k: v for k, v in run("x").items() if k != "run_id"},  # 3 missing run_id
                run("bad-type", n_trainers="sixteen"),  # 4 wrong type
                run("bad-count", n_sparse_ps=-2),  # 5 negative count
                run("bad-watts", power_w=-100.0),  # 6 negative watts
                run("bad-nan", embedding_gb=float("nan")),  # 7 NaN (json.dumps writes the NaN literal)
                run("bad-inf", throughput_eps="inf"),  # 8 infinity
                run("bad-platform", platform="tpu_pod"),  # 9 unknown platform
                run("bad-placement", placement="ssd"),  # 10 unknown placement
                run("bad-mlp", bottom_mlp="512x256"),  # 11 malformed MLP widths
                run("bad-order", end_ts=f"{DAY}T00:30:00Z"),  # 12 ends before it starts
                run("good-1", model_name="M2prod"),  # 13 duplicate key
                '{"run_id": "bad-json", ',  # 14 not JSON
                "[1, 2, 3]",  # 15 JSON but not an object
                run("bad-ts", start_ts="yesterday"),  # 16 unparseable timestamp
                run("bad-end", end_ts=None),  # 17 succeeded without an end
                run("bad-status", status="exploded"),  # 18 unknown status
                "",  # 19 blank line: not a row
                run("bad-util-range", normalized_entropy=7.5),  # 20 NE above its bound
            ]
        ),
        {
            3: "missing_required",
            4: "wrong_type",
            5: "out_of_bounds",
            6: "out_of_bounds",
            7: "not_finite",
            8: "not_finite",
            9: "unknown_value",
            10: "unknown_value",
            11: "bad_pattern",
            12: "out_of_bounds",
            13: "duplicate_key",
            14: "bad_json",
            15: "not_an_object",
            16: "wrong_type",
            17: "missing_required",
            18: "unknown_value",
            20: "out_of_bounds",
        },
    )
    add(
        "utilisation_samples.csv",
        "\n".join(
            [
                SAMPLE_HEADER,  # line 1: header
                sample(),  # 2 accepted
                sample(server="t1"),  # 3 accepted
                sample(server="t2", cpu="1.5"),  # 4 utilisation above 1
                sample(server="t3", role="worker"),  # 5 unknown role
                sample(run_id="ghost"),  # 6 sample of an unknown run
                sample(server="t4", ts=f"{DAY}T09:00:00Z"),  # 7 outside its run
                sample(),  # 8 duplicate of line 2
                sample(server="t5", bw="NaN"),  # 9 NaN
                sample(server="t6", net="high"),  # 10 wrong type
                sample(server="t7", ts="2026-13-45T99:00:00Z"),  # 11 impossible timestamp
                sample(run_id="", server="t8"),  # 12 empty run_id
                "",  # 13 a blank line is no record
                "only,two",  # 14 two fields where the header has eleven
                sample(server="t9", role='"train\ner"'),  # 15-16 a quoted line break, then an unknown role
                sample(server="t10", cpu="2"),  # 17 utilisation above 1: its own line, not the 15th record
            ]
        ).encode()
        + b"\n",
        {
            4: "out_of_bounds",
            5: "unknown_value",
            6: "unknown_run",
            7: "ts_outside_run",
            8: "duplicate_key",
            9: "not_finite",
            10: "wrong_type",
            11: "wrong_type",
            12: "missing_required",
            14: "bad_csv_row",
            15: "unknown_value",
            17: "out_of_bounds",
        },
    )
    add("runs-empty.jsonl", b"", {0: "file_empty"})
    add(
        "utilisation_samples-cut.csv.gz",
        gzip.compress((SAMPLE_HEADER + "\n" + sample(server="z") + "\n").encode() * 40, mtime=0)[:-30],
        {0: "file_truncated"},
    )
    add(
        "runs-latin1.csv",
        "run_id,model_name\nr\xe9sum\xe9,M1prod\n".encode("latin-1"),
        {0: "file_bad_encoding"},
    )
    add("runs.xlsx", b"PK\x03\x04\x14\x00\x06\x00 not a spreadsheet we read", {0: "file_unknown_format"})
    add("inventory.jsonl", jl([{"rack": 1}]), {0: "file_unknown_table"})
    add(
        "runs-huge.jsonl.gz",
        gzip.compress(jl([run("huge", notes="x" * (1 << 20))]), mtime=0),
        {0: "file_oversized_line"},
    )
    add("runs-broken.parquet", b"PAR1" + b"\x00garbage\x00" * 8 + b"PAR1", {0: "file_unreadable"})
    add("runs-header-only.csv", b"run_id,status\n", {0: "file_empty"})
    add(
        "runs-bomb.jsonl.gz",  # 70 KB expanding to 72 MB of "{}" lines (1000x): refused while decompressing
        gzip.compress(b"{}\n" * 24_000_000, compresslevel=9, mtime=0),
        {0: "file_decompression_limit"},
    )
    noisy = [sample(run_id=f"ghost-{i}", server=f"s{i}") for i in range(1003)]  # every row an unknown run
    add(
        "utilisation_samples-noisy.csv",
        "\n".join([SAMPLE_HEADER, *noisy]).encode() + b"\n",
        {**dict.fromkeys(range(2, 1002), "unknown_run"), 1002: "rejects_capped"},  # 1,000 listed, 1 summary
    )
    add(
        "node-exporter.prom",  # a scrape saved with timestamps (Prometheus text, milliseconds)
        b"# TYPE node_load1 gauge\n"
        b'node_load1{instance="n1:9100"} 0.5 1795132800000\n'  # 2: accepted (a metric_samples row)
        b'node_load1{instance="n1:9100" 0.6 1795132860000\n'  # 3: the labels never close
        b'node_load1{instance="n1:9100"} 0.7\n'  # 4: no timestamp (a live scrape)
        b'node_load1{instance="n1:9100"} 0.8 946684799000\n',  # 5: 1999-12-31
        {3: "bad_metric_line", 4: "missing_required", 5: "out_of_bounds"},
    )
    copy = jl([run("copy-1"), run("copy-2")])
    add("runs-a-first.jsonl", copy)
    add(
        "runs-b-again.jsonl", copy, {0: "file_duplicate"}
    )  # identical bytes delivered again under another name

    landing = HERE / "landing"
    shutil.rmtree(landing, ignore_errors=True)
    for rel, data in files.items():
        path = landing / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return expected


if __name__ == "__main__":
    exp = build()
    (HERE / "expected.json").write_text(
        json.dumps({f: {str(k): v for k, v in r.items()} for f, r in exp.items()}, indent=2) + "\n"
    )
    print(f"{len(exp)} files, {sum(len(r) for r in exp.values())} expected quarantine entries")

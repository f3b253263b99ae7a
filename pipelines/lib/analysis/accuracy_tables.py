"""`fleet calibrate --json` as the accuracy page's tables: the paper's targets, every public system predicted
against observed, multi-node scaling and the public-benchmark targets. The docs keep the record
(docs/measurements/calibrate.json) and a test holds it equal to what `fleet calibrate` answers now."""

from __future__ import annotations

import json
from pathlib import Path

from pipelines.lib.paths import PROJECT_ROOT

RECORD = PROJECT_ROOT / "docs" / "measurements" / "calibrate.json"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|")


def _verdict(passed: bool, by_construction: object = None) -> str:
    if not passed:
        return "**fails**"
    return "passes (by construction)" if by_construction else "passes"


def _millions(eps: float) -> str:
    return f"{eps / 1e6:.2f}M"


def paper_targets(record: dict) -> str:
    rows = ["| target | kind | what | want | model | verdict |", "| --- | --- | --- | --- | --- | --- |"]
    for t in record["targets"]:
        rows.append(
            f"| {t['id']} | {t['kind']} | {_cell(t['description'])} | {_cell(t['expected'])} "
            f"| {_cell(t['value'])} | {_verdict(t['passed'], t.get('by_construction'))} |"
        )
    return "\n".join(rows)


def systems(record: dict) -> str:
    rows = [
        "| system (MLPerf round) | nodes | framework | observed samples/s | predicted | ratio "
        "| leave-one-out ratio | no software stated |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in sorted(record["public_benchmarks"]["systems"], key=lambda s: -s["observed_eps"]):
        rows.append(
            f"| {_cell(s['system'])} ({s['round']}) | {s['nodes']} | {_cell(s['framework'])} "
            f"| {_millions(s['observed_eps'])} | {_millions(s['predicted_eps'])} | {s['ratio']:.2f} "
            f"| {s['loso_ratio']:.2f} | {s['unstated_ratio']:.2f} |"
        )
    return "\n".join(rows)


def scaling(record: dict) -> str:
    rows = ["| many nodes / one node | observed | predicted |", "| --- | ---: | ---: |"]
    for s in record["public_benchmarks"]["scaling"]:
        many, one = s["many"].removeprefix("mlperf_"), s["one"].removeprefix("mlperf_")
        rows.append(f"| {many} / {one} | {s['observed']:.2f} | {s['predicted']:.2f} |")
    return "\n".join(rows)


def benchmark_targets(record: dict) -> str:
    rows = ["| target | want | model | verdict |", "| --- | --- | --- | --- |"]
    for t in record["public_benchmarks"]["targets"]:
        rows.append(
            f"| {t['id']} {_cell(t['description'])} | {_cell(t['expected'])} | {_cell(t['value'])} "
            f"| {_verdict(t['passed'])} |"
        )
    return "\n".join(rows)


def markdown(record: dict) -> str:
    """Every table of the record, each under a heading."""
    passed = sum(t["passed"] for t in record["targets"])
    parts = [
        f"### The paper's targets\n\n{passed} of {len(record['targets'])} pass.\n\n{paper_targets(record)}",
        "### Public systems, predicted against observed\n\nRatio = predicted / observed.\n\n"
        + systems(record),
        f"### Multi-node scaling\n\n{scaling(record)}",
        f"### Public-benchmark targets\n\n{benchmark_targets(record)}",
    ]
    return "\n\n".join(parts) + "\n"


def recorded(path: Path = RECORD) -> dict:
    return json.loads(path.read_text())

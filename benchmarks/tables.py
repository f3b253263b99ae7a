"""A benchmark record (the JSON `benchmarks/suite.py` writes) as the performance page's tables: what was
measured, against what, and whether each target was met. The cases' descriptions are the suite's own
docstring, so the page and the suite cannot disagree."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

SUITE = Path(__file__).with_name("suite.py")
RECORDS = Path(__file__).resolve().parents[1] / "docs" / "measurements"
_BULLET = re.compile(r"^- ``(?P<names>[^`]+)``(?P<more>[^:]*): (?P<text>.*)$")


def case_descriptions(suite: Path = SUITE) -> list[tuple[re.Pattern[str], str, str]]:
    """(pattern of the case names a bullet covers, its title, its text), in the docstring's order."""
    doc = ast.get_docstring(ast.parse(suite.read_text())) or ""
    out: list[tuple[re.Pattern[str], str, str]] = []
    lines = doc.split("Cases (", 1)[1].splitlines()[1:]
    for line in lines:
        m = _BULLET.match(line)
        if m:
            title = m["names"] + m["more"].replace("``", "`")
            out.append((_names_pattern(m["names"]), title, m["text"].replace("``", "`")))
        elif out and line.startswith("  "):
            pattern, title, text = out[-1]
            out[-1] = (pattern, title, f"{text} {line.strip().replace('``', '`')}")
        elif out and not line.strip():
            break
    return out


def _names_pattern(names: str) -> re.Pattern[str]:
    # "ingest-parquet|csv|jsonl" covers ingest-parquet, ingest-csv, ingest-jsonl; "split-K" covers split-2...
    head, _, tail = names.partition("-")
    alternatives = tail.split("|") if tail else []
    body = re.escape(head) + (f"-(?:{'|'.join(re.escape(a) for a in alternatives)})" if tail else "")
    body = body.replace("K", r"\d+")
    return re.compile(rf"^{body}(?:-[\w-]+)?$")  # night-10M, memory-csv, partials-2-by-time


def records(folder: Path = RECORDS) -> list[dict]:
    """The records kept beside the docs, newest first (by their measurement time)."""
    found = [json.loads(p.read_text()) for p in folder.glob("bench-*.json")]
    return sorted(found, key=lambda r: r["when"], reverse=True)


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def markdown(record: dict, suite: Path = SUITE) -> str:
    """The record as a markdown table, then what each case measures."""
    families = ", ".join(sorted({r["case"].split("-")[0] for r in record["rows"]}))
    commit = record.get("commit") or "unknown"
    head = (
        f"### {record['when'][:10]}: {families}\n\n"
        f"Measured {record['when']} on {record['cpus']} cores at commit `{commit}`: "
        f"{record['samples']:,} samples a day, medians of {record.get('repeats', '?')} interleaved repeats."
    )
    rows = [
        "| case | product s | anchor s | ratio | target | met | product RSS MB | anchor RSS MB | note |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    for r in record["rows"]:
        note = (r.get("note") or "").replace("|", "\\|")
        met = "yes" if r["ok"] else "**no**"
        rows.append(
            f"| {r['case']} | {_num(r['product_s'])} | {_num(r.get('anchor_s'))} | {_num(r.get('ratio'))} "
            f"| {_num(r.get('target'))} | {met} | {_num(r.get('product_rss_mb'), 0)} "
            f"| {_num(r.get('anchor_rss_mb'), 0)} | {note} |"
        )
    described = []
    cases = [r["case"] for r in record["rows"]]
    for pattern, title, text in case_descriptions(suite):
        if any(pattern.match(c) for c in cases):
            described.append(f"- `{title}`: {text}")
    return "\n".join([head, "", *rows, "", "What each case measures:", "", *described]) + "\n"

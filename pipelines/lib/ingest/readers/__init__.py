"""Readers of landing files, one module per format, and the registry that recognises a file's format.

A format declares how to recognise it (a magic number that beats the file name, the names it goes by, a
sniff of the content when the name says nothing), how to read it in batches (``read``: RawBatch or
FallBack, rows numbered as the format defines its row numbers) and, for formats whose records are lines,
how to recover a row's original text (``line_texts``) and the reference verdict on a line (``verdicts``);
``raw_is_line`` when a rejected row's raw record is its line (JSON Lines) rather than its fields (CSV).
A format whose files always feed one contract says which (``table``: Prometheus exports feed
metric_samples whatever their name); the others feed the table their file's name gives. Adding a format is
one module and one line in ``FORMATS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pipelines.lib.contracts import Contract
from pipelines.lib.ingest.readers import csv, jsonl, openmetrics, parquet, prom_json
from pipelines.lib.ingest.readers.base import FallBack, FileInfo, RawBatch, Source


@dataclass(frozen=True)
class Format:
    """One landing format."""

    name: str
    suffixes: tuple[str, ...]  # names it goes by (before an optional .gz)
    read: Callable[[Source, Contract, FileInfo], Iterator[RawBatch | FallBack]]
    row_number: str  # what a row number means in this format (shown in the quarantine's docs)
    magic: Callable[[bytes], bool] = lambda _head: False  # content that identifies it whatever the name
    sniff: Callable[[bytes], bool] = lambda _head: (
        False
    )  # content that suggests it when the name says nothing
    line_texts: Callable | None = None  # (Source, sorted rows) -> groups of {row: original text}
    # (Source) -> a context: (Contract, {row: text}, allowed, rel) -> reference verdicts (verdict_frame)
    verdicts: Callable | None = None
    raw_is_line: bool = False
    table: str | None = None  # the contract every file of this format feeds (None: the file's name says)

    def __post_init__(self) -> None:
        if (self.line_texts is None) != (self.verdicts is None):
            raise ValueError(f"format {self.name}: line_texts and verdicts come together (texts are judged)")


FORMATS: tuple[Format, ...] = (
    Format(
        "jsonl",
        (".jsonl", ".ndjson", ".json"),
        jsonl.read,
        "the line",
        sniff=lambda head: head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["),
        line_texts=jsonl.line_texts,
        verdicts=jsonl.Verdicts,
        raw_is_line=True,
    ),
    Format(
        "csv",
        (".csv",),
        csv.read,
        "the line on which the record starts (the header is line 1)",
        line_texts=csv.line_texts,
        verdicts=csv.Verdicts,
    ),
    Format("parquet", (".parquet",), parquet.read, "the row", magic=lambda head: head[:4] == b"PAR1"),
    Format(
        "prometheus_json",
        (".prom.json",),
        prom_json.read,
        "the sample's position in the file",
        magic=prom_json.magic,
        table="metric_samples",
    ),
    Format(
        "openmetrics",
        (".om", ".prom", ".openmetrics"),
        openmetrics.read,
        "the line",
        sniff=openmetrics.sniff,
        table="metric_samples",
    ),
)
BY_NAME = {f.name: f for f in FORMATS}


def detect(name: str, head: bytes, named_table: str | None = None) -> tuple[Format | None, bool]:
    """(format, gzipped) from content where it is unambiguous, else from the name, else from a sniff of
    the content. A gzipped file whose name says nothing is decided on its decompressed head (format None).
    Content never turns a file whose name gives its contract (``named_table``) into a format that feeds
    another one: ``runs.jsonl`` is JSON Lines whatever its first line holds."""
    gz = head[:2] == b"\x1f\x8b"
    base = name[:-3] if name.endswith(".gz") else name

    def may(f: Format) -> bool:
        return f.table is None or named_table is None or f.table == named_table

    for f in FORMATS:
        if f.magic(head) and may(f):
            return f, False
    named = [(len(x), f) for f in FORMATS for x in f.suffixes if base.endswith(x)]
    if named:  # the longest suffix names it: cpu.prom.json is an API response, not JSON Lines
        return max(named, key=lambda m: m[0])[1], gz
    if gz:
        return None, True
    for f in FORMATS:
        if f.sniff(head) and may(f):
            return f, False
    return None, False

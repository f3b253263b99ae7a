"""Readers of landing files, one module per format, and the registry that recognises a file's format.

A format declares how to recognise it (a magic number that beats the file name, the names it goes by, a
sniff of the content when the name says nothing), how to read it in batches (``read``: RawBatch or
FallBack, rows numbered as the format defines its row numbers) and, for formats whose records are lines,
how to recover a row's original text (``line_texts``) and the reference verdict on a line (``verdicts``).
Adding a format is one module and one line in ``FORMATS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pipelines.lib.contracts import Contract
from pipelines.lib.ingest.readers import csv, jsonl, parquet
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
    verdicts: Callable | None = None  # a context: (Contract, {row: text}, allowed, rel) -> reference verdicts


FORMATS: tuple[Format, ...] = (
    Format(
        "jsonl",
        (".jsonl", ".ndjson", ".json"),
        jsonl.read,
        "the line",
        sniff=lambda head: head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["),
        line_texts=jsonl.line_texts,
        verdicts=jsonl.Verdicts,
    ),
    Format("csv", (".csv",), csv.read, "the line on which the record starts (the header is line 1)"),
    Format("parquet", (".parquet",), parquet.read, "the row", magic=lambda head: head[:4] == b"PAR1"),
)
BY_NAME = {f.name: f for f in FORMATS}


def detect(name: str, head: bytes) -> tuple[Format | None, bool]:
    """(format, gzipped) from content where it is unambiguous, else from the name, else from a sniff of
    the content. A gzipped file whose name says nothing is decided on its decompressed head (format None)."""
    gz = head[:2] == b"\x1f\x8b"
    base = name[:-3] if name.endswith(".gz") else name
    for f in FORMATS:
        if f.magic(head):
            return f, False
    for f in FORMATS:
        if base.endswith(f.suffixes):
            return f, gz
    if gz:
        return None, True
    for f in FORMATS:
        if f.sniff(head):
            return f, False
    return None, False

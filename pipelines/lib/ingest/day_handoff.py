"""What a split day hands from one process to another, as plain, versioned data: a JSON manifest and
Parquet side files beside it, never pickles (a task file another worker offers is read, not executed).

- the settled day (``save_settled`` / ``load_settled``): every file's ledger state, the settled runs and
  their windows, what other days hold, the staged parts, for the slices to read against and the merge to
  finish;
- a read slice (``save_slice`` / ``load_slice``): its files' states and its staged parts;
- a slice's task (``save_task`` / ``load_task``): the data home and the slice, for a process or a worker.

Each manifest names its kind and ``VERSION``; a reader refuses any other (``HandoffVersion``), so a worker
running other code never misreads a day. The side files are written first and the manifest last, by
rename: a manifest that exists is complete.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipelines.lib.contracts import contract
from pipelines.lib.ingest import dedupe
from pipelines.lib.ingest.day import Day
from pipelines.lib.ingest.day_runs import DayRuns
from pipelines.lib.ingest.day_staging import METRICS_PARQUET, DayStaging
from pipelines.lib.ingest.day_state import METRICS, FileState, SamplePart
from pipelines.lib.ingest.entries import REJECT_SCHEMA, FileEntry, FileReject, RejectLog
from pipelines.lib.ingest.readers import FORMATS
from pipelines.lib.ingest.readers.base import FileInfo, Source
from pipelines.lib.ingest.staging import StagedParquet
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import IngestLimits
from pipelines.lib.storage.landing import LandingFile

VERSION = 1
_FILE = "__fleet_file"  # a kept reject's file: its position in the manifest's files


class HandoffVersion(ValueError):
    """A manifest of another kind or version than this code reads."""


@dataclass
class SliceResult:
    """What a read slice hands to the merge: its files' states, its staged parts and who read it."""

    files: list[FileState]
    parts: list[SamplePart]
    extra_parts: list[tuple[Path, int]]
    dead_samples: set[int]
    dead_extras: set[int]
    slices: list[dict]


# -- the three kinds


def save_settled(state: Day, path: Path) -> None:
    runs = state.runs
    side = {
        "runs": runs.runs,
        "windows": runs.windows,
        "prior_sample_hashes": pl.DataFrame({"h": sorted(runs.prior_sample_hashes)}, schema={"h": pl.UInt64}),
        "prior_files": pl.DataFrame(
            [(k, d, s) for k, (d, s) in state.prior.files.items()],
            schema={"blake3": pl.String, "day": pl.String, "source_file": pl.String},
            orient="row",
        ),
        "prior_sizes": pl.DataFrame({"size": sorted(state.prior.sizes)}, schema={"size": pl.Int64}),
        "prior_runs": pl.DataFrame(
            list(state.prior.runs.items()), schema={"run_id": pl.String, "day": pl.String}, orient="row"
        ),
    }
    body = {
        "day": state.day,
        "staging": str(state.staging),
        "now": state.now.isoformat(),
        "limits": dataclasses.asdict(state.limits),
        "platforms": sorted(state.allowed["hardware_catalog"]),
        "notes": state.notes,
        "slices": state.slices,
        "dup_runs": runs.dup_runs,
        "seen": state.book.seen,
        "seen_sizes": sorted(state.book.seen_sizes),
        **_staged(state.staged),
    }
    _write(path, "settled-day", body, state.book.files, side)


def load_settled(home: DataHome, path: Path) -> Day:
    body, side = _read(path, "settled-day")
    limits = IngestLimits(**body["limits"])
    runs = DayRuns()
    runs.runs, runs.windows = side["runs"], side["windows"]
    runs.dup_runs = body["dup_runs"]
    runs.prior_sample_hashes = set(side["prior_sample_hashes"]["h"].to_list())
    prior = dedupe.Prior(
        files={k: (d, s) for k, d, s in side["prior_files"].iter_rows()},
        sizes=set(side["prior_sizes"]["size"].to_list()),
        runs=dict(side["prior_runs"].iter_rows()),
    )
    state = Day(
        home,
        body["day"],
        body["platforms"],
        Path(body["staging"]),
        dt.datetime.fromisoformat(body["now"]),
        limits,
        prior=prior,
        runs=runs,
    )
    state.notes, state.slices = body["notes"], body["slices"]
    state.book.files = _files(body, side, limits)
    state.book.seen = {k: (rel, rows) for k, (rel, rows) in body["seen"].items()}
    state.book.seen_sizes = set(body["seen_sizes"])
    _restore_staged(state.staged, body)
    return state


def save_slice(state: Day, path: Path) -> None:
    _write(path, "read-slice", {"slices": state.slices, **_staged(state.staged)}, state.book.files, {})


def load_slice(path: Path, limits: IngestLimits) -> SliceResult:
    body, side = _read(path, "read-slice")
    staged = body["staged"]
    return SliceResult(
        files=_files(body, side, limits),
        parts=[_part(p) for p in staged["parts"]],
        extra_parts=[(Path(p), n) for p, n in staged["extra_parts"]],
        dead_samples=set(staged["dead_samples"]),
        dead_extras=set(staged["dead_extras"]),
        slices=body["slices"],
    )


def save_task(path: Path, home: DataHome, piece: Any) -> None:
    """``piece``: a ``split.Slice`` (a plain dataclass of text, numbers and paths)."""
    fields = {k: _plain(v) for k, v in dataclasses.asdict(piece).items()}
    _write(path, "slice-task", {"home": str(home.root), "lake_uri": home.lake_uri, "slice": fields}, [], {})


def load_task(path: Path) -> tuple[DataHome, dict[str, Any]]:
    """The data home and the slice's fields (``split`` makes its ``Slice`` of them)."""
    body, _ = _read(path, "slice-task")
    return DataHome(Path(body["home"]), body["lake_uri"]), body["slice"]


# -- manifests and side files


def _write(path: Path, kind: str, body: dict, files: list[FileState], side: dict[str, pl.DataFrame]) -> None:
    names = {}
    if files:
        side = {**side, "rejects": _rejects(files)}
    for name, frame in side.items():
        names[name] = f"{path.stem}.{name}.parquet"
        frame.write_parquet(path.parent / names[name])
    manifest = {"kind": kind, "version": VERSION, **body, "side": names}
    if files:
        manifest["files"] = [_file(f, files) for f in files]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest))
    tmp.replace(path)


def _read(path: Path, kind: str) -> tuple[dict, dict[str, pl.DataFrame]]:
    body = json.loads(path.read_text())
    if not isinstance(body, dict) or (body.get("kind"), body.get("version")) != (kind, VERSION):
        found = f"{body.get('kind')!r} version {body.get('version')!r}" if isinstance(body, dict) else "no"
        raise HandoffVersion(
            f"{path}: holds {found} manifest; this code reads {kind!r} version {VERSION} only "
            "(written by another version of the ingest: run the day again)"
        )
    side = {name: pl.read_parquet(path.parent / rel) for name, rel in body["side"].items()}
    return body, side


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


# -- files


def _rejects(files: list[FileState]) -> pl.DataFrame:
    kept = [f.rejects.kept.with_columns(pl.lit(i, pl.Int32).alias(_FILE)) for i, f in enumerate(files)]
    return pl.concat(kept) if kept else pl.DataFrame(schema={**REJECT_SCHEMA, _FILE: pl.Int32})


def _file(f: FileState, files: list[FileState]) -> dict:
    if f.run_extras:
        raise RuntimeError(f"{f.lf.relpath}: its runs' extra fields are not staged yet")
    lf, e = f.lf, f.entry
    return {
        "lf": {k: _plain(v) for k, v in dataclasses.asdict(lf).items()},
        "order": f.order,
        "entry": {
            **dataclasses.asdict(e),
            "day": e.day.isoformat(),
            "ingested_at": e.ingested_at.isoformat(),
        },
        "table": f.table,
        "derived_from": None if f.derived_from is None else files.index(f.derived_from),
        "accepted": f.accepted,
        "rejects": {
            "keep": f.rejects.keep,
            "raw_max": f.rejects.raw_max,
            "total": f.rejects.total,
            "over": dict(f.rejects.over),
            "over_first": f.rejects.over_first,
        },
        "row_groups": f.row_groups,
        "extra_groups": f.extra_groups,
        "format": None if f.fmt is None else f.fmt.name,
        "source": None if f.src is None else {"gz": f.src.gz, "scratch": str(f.src.scratch)},
        "info": dataclasses.asdict(f.info),
        "hashed": f.hashed,
    }


def _files(body: dict, side: dict[str, pl.DataFrame], limits: IngestLimits) -> list[FileState]:
    records = body.get("files", [])
    rejects = side["rejects"].partition_by(_FILE, as_dict=True, include_key=False) if records else {}
    formats = {f.name: f for f in FORMATS}
    out: list[FileState] = []
    for i, r in enumerate(records):
        lf = LandingFile(
            **{
                **r["lf"],
                "path": Path(r["lf"]["path"]),
                "problem": tuple(r["lf"]["problem"]) if r["lf"]["problem"] else None,
                "signature": tuple(r["lf"]["signature"]),
            }
        )
        e = r["entry"]
        entry = FileEntry(
            **{
                **e,
                "day": dt.date.fromisoformat(e["day"]),
                "ingested_at": dt.datetime.fromisoformat(e["ingested_at"]),
                "problem": FileReject(**e["problem"]) if e["problem"] else None,
            }
        )
        lg = r["rejects"]
        log = RejectLog(lg["keep"], lg["raw_max"], total=lg["total"], over_first=lg["over_first"])
        log.over = collections.Counter(lg["over"])
        log.kept = rejects.get((i,), pl.DataFrame(schema=REJECT_SCHEMA))
        src = r["source"]
        out.append(
            FileState(
                lf=lf,
                order=r["order"],
                entry=entry,
                table=r["table"],
                derived_from=None if r["derived_from"] is None else out[r["derived_from"]],
                accepted=r["accepted"],
                rejects=log,
                row_groups=r["row_groups"],
                extra_groups=r["extra_groups"],
                fmt=formats[r["format"]] if r["format"] else None,
                src=None
                if src is None
                else Source(lf.path, lf.relpath, src["gz"], Path(src["scratch"]), limits),
                info=FileInfo(**r["info"]),
                hashed=r["hashed"],
            )
        )
    return out


# -- staged files


def _staged(staged: DayStaging) -> dict:
    metrics = staged.metrics
    if not staged.sealed or metrics.writing:
        raise RuntimeError(f"{staged.staging}: handed on before its staged files were closed")
    return {
        "staged": {
            "parts": [
                {
                    "samples": str(p.samples),
                    "hashes": str(p.hashes),
                    "group_sizes": p.group_sizes,
                    "problems": p.problems,
                }
                for p in staged.parts
            ],
            "extra_parts": [[str(p), n] for p, n in staged.extra_parts],
            "dead_samples": sorted(staged.dead_samples),
            "dead_extras": sorted(staged.dead_extras),
            "dead_metrics": sorted(staged.dead_metrics),
            "metrics": {"path": str(metrics.path), "groups": metrics.groups, "rows": metrics.rows},
        }
    }


def _part(p: dict) -> SamplePart:
    return SamplePart(Path(p["samples"]), Path(p["hashes"]), p["group_sizes"], p["problems"])


def _restore_staged(staged: DayStaging, body: dict) -> None:
    s = body["staged"]
    staged.sealed = True
    staged.parts = [_part(p) for p in s["parts"]]
    staged.extra_parts = [(Path(p), n) for p, n in s["extra_parts"]]
    staged.dead_samples, staged.dead_extras = set(s["dead_samples"]), set(s["dead_extras"])
    staged.dead_metrics = set(s["dead_metrics"])
    m = s["metrics"]
    staged.metrics = StagedParquet.written(
        Path(m["path"]), contract(METRICS).arrow_schema(), m["groups"], m["rows"], **METRICS_PARQUET
    )

"""A day too big for one pass, read in slices and merged, with the same result as one pass (when
``IngestLimits.slice_bytes`` is set). Each phase is a step of the day's Dagster run (``raw_ingest``), so the
executor decides where slices are read: one after another in the run's process, on every core, or on the
Celery workers; ``promote.ingest_partition`` runs the phases in order outside Dagster.

1. ``settle_day``: the day's runs files and Prometheus samples are read, the runs settled (first delivery
   wins, across files and days) and the runs and samples derived from Prometheus staged, once. The
   utilisation-sample files are planned into slices: by source, a source above ``slice_bytes`` cut in
   landing order.
2. ``ingest_slice``: each slice's files are read, validated and staged in a process of its own, against
   the settled runs (windows, runs delivered again), in a folder of its own under the split's staging folder;
   the slice then computes its staged file's aggregates for the day's analyses (``analytics.store_partials``),
   where it runs, so a day's analyses are spread over the machines that read its slices too.
3. ``merge_day``: the slices' files take their place in the day's ledger; a file that repeats one of
   another slice (same BLAKE3) becomes a duplicate of the first delivery, as in one pass; sample keys
   repeated across slices are settled over every slice's staged key hashes (first delivery wins); the
   slices' staged samples are published as they are, one file each, in one commit.

The states travel between processes as plain, versioned data in the split's staging folder (under the
data home, which every process reaching the day reaches): JSON manifests and Parquet side files
(``day_handoff``); a slice's task file names it (``write_tasks``, ``read_task``).
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import blake3

from pipelines.lib.analysis.analytics import store_partials
from pipelines.lib.ingest import day_handoff
from pipelines.lib.ingest.day import Day, day_result, rank, table_of
from pipelines.lib.ingest.day_state import DayIngest, FileState
from pipelines.lib.ingest.readers.base import FileInfo
from pipelines.lib.paths import SCHEMAS_DIR, DataHome
from pipelines.lib.settings import DEFAULT_LIMITS, IngestLimits
from pipelines.lib.storage.landing import LandingFile, day_files

SETTLED = "settled.json"
SLICE_ERROR_LINES = 20  # of a failed slice's error, in the day's
STALE_SPLIT_S = 24 * 3600  # a split's staging folder untouched this long was left by a killed run


@dataclass(frozen=True)
class Slice:
    """Landing files of one day read together on one worker."""

    day: str
    root: Path  # the split's staging folder
    index: int
    files: tuple[int, ...]  # positions in the day's landing files (delivery order)
    source: str
    size_bytes: int
    code: str = ""  # the ingest code that planned it (``code_stamp``)

    @property
    def key(self) -> str:
        """A name for the slice (a Dagster mapping key): its position and source."""
        clean = "".join(c if c.isalnum() else "_" for c in self.source)[:40]
        return f"s{self.index:03d}_{clean}"


def plan_slices(files: list[LandingFile], tables: list[str | None], slice_bytes: int) -> list[list[int]]:
    """The day's utilisation-sample files (and files of no known table) in slices of about
    ``slice_bytes`` at most: one source per slice, a larger source cut in delivery order (a file is never
    cut). [] when they fit one slice or ``slice_bytes`` is 0: the day is read in one pass."""
    if not slice_bytes:
        return []
    by_source: dict[str, list[int]] = {}
    for i, (lf, table) in enumerate(zip(files, tables, strict=True)):
        if rank(table) == 2:
            by_source.setdefault(lf.source, []).append(i)
    if sum(files[i].signature[1] for idx in by_source.values() for i in idx) <= slice_bytes:
        return []
    slices: list[list[int]] = []
    for _, idx in sorted(by_source.items()):
        current: list[int] = []
        size = 0
        for i in idx:
            n = files[i].signature[1]
            if current and size + n > slice_bytes:
                slices.append(current)
                current, size = [], 0
            current.append(i)
            size += n
        slices.append(current)
    return slices if len(slices) > 1 else []


def settle_day(
    home: DataHome,
    day: str,
    platforms: Iterable[str],
    limits: IngestLimits = DEFAULT_LIMITS,
    now: dt.datetime | None = None,
) -> list[Slice]:
    """Phase 1: the day's slices, its runs settled and staged for them; [] when the day fits one pass
    (nothing is staged then)."""
    _remove_stale_splits(home, day)
    root = home.staging / f"split-day={day}.{uuid.uuid4().hex[:12]}"
    root.mkdir(parents=True)
    state = None
    try:
        files = day_files(home, day)
        tables = [table_of(lf, root) for lf in files]
        planned = plan_slices(files, tables, limits.slice_bytes)
        if not planned:
            shutil.rmtree(root, ignore_errors=True)
            return []
        state = Day(home, day, platforms, root, now or dt.datetime.now(dt.UTC), limits)
        made = [state.new_file(lf, i, t) for i, (lf, t) in enumerate(zip(files, tables, strict=True))]
        for f in sorted(made, key=lambda f: (rank(f.table), f.order)):
            if rank(f.table) < 2:
                state.ingest_file(f)
        state.derive()  # settles the runs
        state.stage_run_extras()
        state.seal()
        day_handoff.save_settled(state, root / SETTLED)
    except BaseException:
        if state is not None:
            state.abort()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return [
        Slice(
            day,
            root,
            k,
            tuple(idx),
            files[idx[0]].source,
            sum(files[i].signature[1] for i in idx),
            code_stamp(),
        )
        for k, idx in enumerate(planned)
    ]


def ingest_slice(home: DataHome, piece: Slice, who: str = "") -> Path:
    """Phase 2: read one slice's files against the settled runs, in the folder ``slice-<index>`` of the
    split's folder (``who`` reads it: for the day's record); the path of its sealed state. Read again (a
    retried step), it starts over."""
    settled = day_handoff.load_settled(home, piece.root / SETTLED)
    staging = piece.root / f"slice-{piece.index}"
    shutil.rmtree(staging, ignore_errors=True)  # a retried slice starts again
    staging.mkdir()
    state = Day(
        home,
        piece.day,
        settled.allowed["hardware_catalog"],
        staging,
        settled.now,
        settled.limits,
        prior=settled.prior,
        runs=settled.runs,
    )
    state.book.seen, state.book.seen_sizes = dict(settled.book.seen), set(settled.book.seen_sizes)
    try:
        for i in piece.files:
            mine = settled.book.files[i]
            state.ingest_file(state.new_file(mine.lf, mine.order, mine.table))
        state.seal()
    except BaseException:
        state.abort()
        raise
    for part in state.staged.parts:  # the day's analyses take these instead of scanning the part again
        store_partials(home, piece.day, part.samples, settled.runs.runs, settled.limits.quantile_values)
    state.runs.drop_frames()  # the merge has them from the settled state
    state.slices = [
        {"slice": piece.key, "files": len(piece.files), "size_bytes": piece.size_bytes, "read_by": who}
    ]
    out = staging / "slice.json"
    day_handoff.save_slice(state, out)
    return out


class SliceFailed(RuntimeError):
    """A slice could not be read: the day is not written."""


def write_tasks(home: DataHome, slices: list[Slice]) -> list[Path]:
    """Each slice's task file, in its split's folder: what a step reading it anywhere is given."""
    tasks = []
    for piece in slices:
        tasks.append(piece.root / f"slice-{piece.index}.task.json")
        day_handoff.save_task(tasks[-1], home, piece)
    return tasks


def read_task(task: Path, who: str) -> Path:
    """Phase 2 of the slice that ``task`` names, read by ``who`` (for the day's record); the path of its
    sealed state. ``SliceFailed`` names the slice, its files and the error, also when this process runs
    other ingest code than the day's, or sees one of its files otherwise (another machine)."""
    home, piece = load_task(task)
    if piece.code != code_stamp():
        raise SliceFailed(_failure(home, piece, "the ingest code here differs from the day's"))
    if differing := _files_differ(home, piece):
        raise SliceFailed(_failure(home, piece, f"{differing} differs here or cannot be read"))
    try:
        return ingest_slice(home, piece, who)
    except Exception as err:
        raise SliceFailed(_failure(home, piece, f"{type(err).__name__}: {err}")) from err


def _files_differ(home: DataHome, piece: Slice) -> str | None:
    """The first of the slice's files that this machine sees otherwise than the day's machine did."""
    settled = day_handoff.load_settled(home, piece.root / SETTLED)
    for i in piece.files:
        lf = settled.book.files[i].lf
        try:
            st = lf.path.stat()
        except OSError:
            return lf.relpath
        if (st.st_mtime_ns, st.st_size) != lf.signature or not os.access(lf.path, os.R_OK):
            return lf.relpath
    return None


@functools.cache
def code_stamp() -> str:
    """The ingest code and the contracts this process runs (a slice is read only by the same)."""
    h = blake3.blake3()
    for path in sorted([*Path(__file__).parent.rglob("*.py"), *SCHEMAS_DIR.glob("*.yaml")]):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _failure(home: DataHome, piece: Slice, detail: str) -> str:
    settled = day_handoff.load_settled(home, piece.root / SETTLED)
    names = [settled.book.files[i].lf.relpath for i in piece.files]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    lines = detail.strip().splitlines()[-SLICE_ERROR_LINES:]
    return (
        f"day {piece.day}: slice {piece.key} ({len(names)} files of source {piece.source}: {shown}) "
        "could not be read; nothing of the day was written: " + "\n".join(lines)
    )


def merge_day(home: DataHome, root: Path, parts: list[Path]) -> DayIngest:
    """Phase 3: the day from its settled runs and its slices (``parts``, in slice order), as one pass
    gives it. Row groups count across the settled state's staged samples, then each slice's."""
    state = day_handoff.load_settled(home, root / SETTLED)
    staged, files = state.staged, state.book.files
    samples_groups = sum(len(p.group_sizes) for p in staged.parts)
    extras_groups = sum(n for _, n in staged.extra_parts)
    position = {f.order: k for k, f in enumerate(files)}
    sliced: list[FileState] = []
    for path in parts:
        piece = day_handoff.load_slice(path, state.limits)
        for f in piece.files:
            f.row_groups = [g + samples_groups for g in f.row_groups]
            f.extra_groups = [g + extras_groups for g in f.extra_groups]
            files[position[f.order]] = f
            sliced.append(f)
        state.slices += piece.slices
        staged.dead_samples |= {g + samples_groups for g in piece.dead_samples}
        staged.dead_extras |= {g + extras_groups for g in piece.dead_extras}
        staged.parts += piece.parts
        staged.extra_parts += piece.extra_parts
        samples_groups += sum(len(p.group_sizes) for p in piece.parts)
        extras_groups += sum(n for _, n in piece.extra_parts)
    _first_deliveries(state, sliced)
    return day_result(state, [f.lf for f in files if f.derived_from is None])


def _first_deliveries(state: Day, sliced: list[FileState]) -> None:
    """Files repeated across slices: each slice knew only the settled files and its own, so the day's
    files are replayed in delivery order, and one that repeats an earlier one (same BLAKE3) becomes its
    duplicate, as reading the day in one pass decides."""
    for f in sorted(sliced, key=lambda f: f.order):
        if f.lf.problem or f.entry.table_name is None:
            continue  # refused before it was opened: never compared
        digest, size = f.entry.blake3, f.entry.size_bytes
        book = state.book
        if f.hashed and book.may_repeat(size) and digest in book.seen:
            f.entry = book.entry(f.lf, f.table)
            f.entry.blake3, f.entry.size_bytes = digest, size
            f.info, f.fmt, f.src = FileInfo(), None, None
            state.repeat_of(f, *book.seen[digest])
        if f.entry.problem is None or f.entry.problem.reason_code != "file_duplicate":
            book.remember(f)


def load_task(path: Path) -> tuple[DataHome, Slice]:
    """A slice's task file (``day_handoff.save_task``): the data home and the slice."""
    home, fields = day_handoff.load_task(path)
    return home, Slice(**{**fields, "root": Path(fields["root"]), "files": tuple(fields["files"])})


def _remove_stale_splits(home: DataHome, day: str) -> None:
    """Staging folders of splits of this day that a killed run left (untouched for STALE_SPLIT_S)."""
    for old in home.staging.glob(f"split-day={day}.*"):
        try:
            newest = max((p.stat().st_mtime for p in old.rglob("*")), default=old.stat().st_mtime)
        except OSError:
            continue
        if time.time() - newest > STALE_SPLIT_S:
            shutil.rmtree(old, ignore_errors=True)

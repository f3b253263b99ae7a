"""A day too big for one pass, read in slices on every core of the machine and merged, with the same
result as one pass (when ``IngestLimits.slice_bytes`` is set).

1. ``settle_day``: the day's runs files and Prometheus samples are read, the runs settled (first delivery
   wins, across files and days) and the runs and samples derived from Prometheus staged, once. The
   utilisation-sample files are planned into slices: by source, a source above ``slice_bytes`` cut in
   landing order.
2. ``ingest_slice``: each slice's files are read, validated and staged in a process of its own, against
   the settled runs (windows, runs delivered again), in a folder of its own under the split's staging folder.
3. ``merge_day``: the slices' files take their place in the day's ledger; a file that repeats one of
   another slice (same BLAKE3) becomes a duplicate of the first delivery, as in one pass; sample keys
   repeated across slices are settled over every slice's staged key hashes (first delivery wins); the
   slices' staged samples are published as they are, one file each, in one commit.

The states travel between processes as pickles in the split's staging folder (under the data home, which
every process reaching the day reaches); only this product writes and reads them. ``read_slices`` runs
phase 2 in Python processes of their own, several at a time, so a large day uses every core of the
machine that runs it.
"""

from __future__ import annotations

import datetime as dt
import os
import pickle
import shutil
import socket
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from filelock import Timeout as LockHeld

from pipelines.lib.ingest.day import Day, DayIngest, FileState, day_result, rank, table_of
from pipelines.lib.ingest.readers.base import FileInfo
from pipelines.lib.landing import LandingFile, day_files
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import DEFAULT_LIMITS, IngestLimits

SETTLED = "settled.pickle"
SLICE_ERROR_LINES = 20  # of a failed slice's process, in its error
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
        _save(state, root / SETTLED)
    except BaseException:
        if state is not None:
            state.abort()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return [
        Slice(day, root, k, tuple(idx), files[idx[0]].source, sum(files[i].signature[1] for i in idx))
        for k, idx in enumerate(planned)
    ]


def ingest_slice(home: DataHome, piece: Slice, who: str = "") -> Path:
    """Phase 2: read one slice's files against the settled runs (``who`` reads it: for the day's
    record); the path of its sealed state."""
    settled: Day = _load(piece.root / SETTLED)
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
    )
    state.runs, state.windows = settled.runs, settled.windows
    state.dup_runs, state.prior_sample_hashes = settled.dup_runs, settled.prior_sample_hashes
    state.seen, state.seen_sizes = dict(settled.seen), set(settled.seen_sizes)
    try:
        for i in piece.files:
            mine = settled.files[i]
            state.ingest_file(state.new_file(mine.lf, mine.order, mine.table))
        state.seal()
    except BaseException:
        state.abort()
        raise
    state.runs = state.windows = None  # the merge has them from the settled state
    state.slices = [
        {"slice": piece.key, "files": len(piece.files), "size_bytes": piece.size_bytes, "read_by": who}
    ]
    out = staging / "slice.pickle"
    _save(state, out)
    return out


class SliceFailed(RuntimeError):
    """A slice's reading failed: the day is not written."""


def claim_slice(home: DataHome, piece: Slice, who: str) -> bool:
    """Read ``piece`` unless another process is reading it or has read it; False when it was not this
    one's to read. The claim is a file lock in the split's folder: the system releases it when its holder
    dies, so the slice of a killed reader is read again by another. A failure is written beside it (its
    traceback) for the day's process, then raised."""
    lock = FileLock(piece.root / f"slice-{piece.index}.lock", timeout=0)
    try:
        lock.acquire()
    except (LockHeld, OSError):  # held, or the day is over and its folder gone
        return False
    try:
        if _done(piece).exists() or _failed(piece).exists():
            return False
        try:
            ingest_slice(home, piece, who)
        except BaseException:
            _write_text(_failed(piece), f"on {who}:\n{traceback.format_exc()}")
            raise
        return True
    finally:
        lock.release()


def offered_slice(task: str, who: str) -> str:
    """A slice offered to other machines (``task``: its task file), read here if it is still to be read;
    what happened, in words."""
    try:
        with open(task, "rb") as fh:
            home, piece = pickle.load(fh)
    except FileNotFoundError:
        return "nothing to do: its day is over"
    if claim_slice(home, piece, who):
        return f"read slice {piece.key} of day {piece.day}"
    return f"nothing to do: slice {piece.key} of day {piece.day} is read elsewhere"


def read_slices(
    home: DataHome,
    slices: list[Slice],
    processes: int = 0,
    offer: Callable[[list[Path]], None] | None = None,
) -> list[Path]:
    """Phase 2 of every slice; the slices' sealed states, in slice order. Slices are read here in Python
    processes of their own, ``processes`` at a time (0: one per core of this machine); with ``offer``,
    they are also offered to other machines (``offer`` sends their task files), and whichever claims a
    slice first reads it. A slice whose reader died is read again here. The first slice that fails stops
    the others and raises ``SliceFailed`` naming it, its files and its last error lines."""
    width = processes or os.cpu_count() or 1
    tasks = []
    for piece in slices:
        tasks.append(piece.root / f"slice-{piece.index}.task.pickle")
        with open(tasks[-1], "wb") as fh:
            pickle.dump((home, piece), fh, protocol=pickle.HIGHEST_PROTOCOL)
    if offer is not None:
        offer(tasks)
    me = f"{socket.gethostname()}:{os.getpid()}"
    pending = dict(zip([s.index for s in slices], zip(slices, tasks, strict=True), strict=True))
    running: dict[subprocess.Popen, Slice] = {}
    try:
        while pending:
            mine = set(running.values())
            for index, (piece, task) in list(pending.items()):
                if _done(piece).exists():
                    del pending[index]
                elif _failed(piece).exists() and piece not in mine:
                    raise SliceFailed(_failure(piece, _failed(piece).read_text(errors="replace")))
                elif piece not in mine and len(running) < width and _free(piece):
                    with open(_error_log(piece), "wb") as err:
                        code = f"from {__name__} import _slice_process; _slice_process({str(task)!r}, {me!r})"
                        proc = subprocess.Popen(
                            [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=err
                        )
                    running[proc] = piece
                    mine.add(piece)
            time.sleep(0.05)
            for proc in [p for p in running if p.poll() is not None]:
                piece = running.pop(proc)
                if (rc := proc.returncode) != 0:
                    how = f"exit code {rc}" if rc > 0 else f"killed by signal {-rc}"
                    lines = _error_log(piece).read_text(errors="replace").strip().splitlines()
                    raise SliceFailed(_failure(piece, "\n".join(lines[-SLICE_ERROR_LINES:]), how))
    finally:
        for proc in running:
            proc.kill()
            proc.wait()
    return [_done(piece) for piece in slices]


def _slice_process(task: str, who: str) -> None:
    with open(task, "rb") as fh:
        home, piece = pickle.load(fh)
    claim_slice(home, piece, f"{who} (process {os.getpid()})")


def _free(piece: Slice) -> bool:
    """Nobody holds the slice's claim (it may be taken before this process's reader takes it)."""
    lock = FileLock(piece.root / f"slice-{piece.index}.lock", timeout=0)
    try:
        lock.acquire()
    except LockHeld:
        return False
    lock.release()
    return True


def _done(piece: Slice) -> Path:
    return piece.root / f"slice-{piece.index}" / "slice.pickle"


def _failed(piece: Slice) -> Path:
    return piece.root / f"slice-{piece.index}.failed"


def _error_log(piece: Slice) -> Path:
    return piece.root / f"slice-{piece.index}.stderr"


def _failure(piece: Slice, detail: str, how: str = "") -> str:
    settled: Day = _load(piece.root / SETTLED)
    names = [settled.files[i].lf.relpath for i in piece.files]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    lines = detail.strip().splitlines()[-SLICE_ERROR_LINES:]
    return (
        f"day {piece.day}: slice {piece.key} ({len(names)} files of source {piece.source}: {shown}) "
        f"failed{f' ({how})' if how else ''}; nothing of the day was written. Its last error lines:\n"
        + ("\n".join(lines) or "(it wrote no error)")
    )


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def merge_day(home: DataHome, root: Path, parts: list[Path]) -> DayIngest:
    """Phase 3: the day from its settled runs and its slices (``parts``, in slice order), as one pass
    gives it. Row groups count across the settled state's staged samples, then each slice's."""
    state: Day = _load(root / SETTLED)
    state.home = home
    samples_groups = sum(len(p.group_sizes) for p in state.parts)
    extras_groups = sum(n for _, n in state.extra_parts)
    position = {f.order: k for k, f in enumerate(state.files)}
    sliced: list[FileState] = []
    for path in parts:
        piece: Day = _load(path)
        for f in piece.files:
            f.row_groups = [g + samples_groups for g in f.row_groups]
            f.extra_groups = [g + extras_groups for g in f.extra_groups]
            state.files[position[f.order]] = f
            sliced.append(f)
        state.slices += piece.slices
        state.dead_samples |= {g + samples_groups for g in piece.dead_samples}
        state.dead_extras |= {g + extras_groups for g in piece.dead_extras}
        state.parts += piece.parts
        state.extra_parts += piece.extra_parts
        samples_groups += sum(len(p.group_sizes) for p in piece.parts)
        extras_groups += sum(n for _, n in piece.extra_parts)
    _first_deliveries(state, sliced)
    return day_result(state, [f.lf for f in state.files if f.derived_from is None])


def _first_deliveries(state: Day, sliced: list[FileState]) -> None:
    """Files repeated across slices: each slice knew only the settled files and its own, so the day's
    files are replayed in delivery order, and one that repeats an earlier one (same BLAKE3) becomes its
    duplicate, as reading the day in one pass decides."""
    for f in sorted(sliced, key=lambda f: f.order):
        if f.lf.problem or f.entry.table_name is None:
            continue  # refused before it was opened: never compared
        digest, size = f.entry.blake3, f.entry.size_bytes
        if f.hashed and state.may_repeat(size) and digest in state.seen:
            f.entry = state._entry(f.lf, f.table)
            f.entry.blake3, f.entry.size_bytes = digest, size
            f.info, f.fmt, f.src = FileInfo(), None, None
            state.repeat_of(f, *state.seen[digest])
        if f.entry.problem is None or f.entry.problem.reason_code != "file_duplicate":
            state.seen.setdefault(digest, (f.lf.relpath, f.entry.rows_in))
            state.seen_sizes.add(size)


def _save(state: Day, path: Path) -> None:
    state.staged = []  # closed writers: nothing left to stop
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        pickle.dump(state, fh, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)


def _load(path: Path) -> Day:
    with open(path, "rb") as fh:
        return pickle.load(fh)


def _remove_stale_splits(home: DataHome, day: str) -> None:
    """Staging folders of splits of this day that a killed run left (untouched for STALE_SPLIT_S)."""
    for old in home.staging.glob(f"split-day={day}.*"):
        try:
            newest = max((p.stat().st_mtime for p in old.rglob("*")), default=old.stat().st_mtime)
        except OSError:
            continue
        if time.time() - newest > STALE_SPLIT_S:
            shutil.rmtree(old, ignore_errors=True)

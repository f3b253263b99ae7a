"""A day too big for one pass, read in slices on every core of its machine (and, on a Celery worker, by
the other workers) and merged, with the same result as one pass (when ``IngestLimits.slice_bytes`` is
set).

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
(``day_handoff``). ``read_slices`` runs phase 2 in Python processes of their own, several at a time, so a
large day uses every core of the machine that runs it; ``claim_slice`` and ``offered_slice`` let other
machines take part.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import blake3
from filelock import FileLock
from filelock import Timeout as LockHeld

from pipelines.lib.analysis.analytics import store_partials
from pipelines.lib.ingest import day_handoff
from pipelines.lib.ingest.day import Day, day_result, rank, table_of
from pipelines.lib.ingest.day_state import DayIngest, FileState
from pipelines.lib.ingest.readers.base import FileInfo
from pipelines.lib.paths import SCHEMAS_DIR, DataHome
from pipelines.lib.settings import DEFAULT_LIMITS, IngestLimits
from pipelines.lib.storage.landing import LandingFile, day_files

SETTLED = "settled.json"
POLL_S = 0.05
HEARTBEAT_S = 5.0
SILENT_S = 60.0  # a slice whose holder showed no life this long is read again by the day's machine
_TASK = re.compile(r"slice-\d+\.task\.json")
_SPLIT = re.compile(r"split-day=\d{4}-\d{2}-\d{2}\.[0-9a-f]{12}")
SLICE_ERROR_LINES = 20  # of a failed slice's process, in its error
STALE_SPLIT_S = 24 * 3600  # a split's staging folder untouched this long was left by a killed run


Offer = Callable[[list[Path]], None]  # sends slices' task files to other machines
_process_offer: Offer | None = None  # set by a process that runs days for a pool of machines


def offer_slices_with(offer: Offer | None) -> None:
    """From now on, the days this process (and the processes it forks) reads in slices also offer them
    with ``offer`` (a `fleet worker` sets it to its broker before it forks the processes of its days).
    Processes of their own, such as a slice's, start without."""
    global _process_offer
    _process_offer = offer


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


def ingest_slice(home: DataHome, piece: Slice, who: str = "", folder: str | None = None) -> Path:
    """Phase 2: read one slice's files against the settled runs, in ``folder`` of the split's folder
    (``slice-<index>`` by default; ``who`` reads it: for the day's record); the path of its sealed
    state."""
    settled = day_handoff.load_settled(home, piece.root / SETTLED)
    staging = piece.root / (folder or f"slice-{piece.index}")
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
    """A slice's reading failed on the day's machine: the day is not written."""


def claim_slice(home: DataHome, piece: Slice, who: str) -> bool:
    """Read ``piece`` unless another process holds it or it is read; False when it was not this one's to
    read. The claim is a file lock in the split's folder (the system releases it when its holder dies);
    while reading, the holder touches the slice's heartbeat file, so the day's machine can read a slice
    again whose holder went silent. Each reading has a folder of its own; the first to finish wins."""
    lock = FileLock(piece.root / f"slice-{piece.index}.lock", timeout=0)
    try:
        lock.acquire()
    except LockHeld:
        return False
    try:
        if _done_marker(piece).exists():
            return False
        with _Heartbeat(piece.root / f"slice-{piece.index}.alive"):
            read_attempt(home, piece, who)
        return True
    finally:
        lock.release()


def read_attempt(home: DataHome, piece: Slice, who: str) -> bool:
    """One reading of ``piece`` in a folder of its own; True if it was the first to finish (its result is
    the slice's), False if another had (its folder is removed)."""
    folder = f"slice-{piece.index}.{uuid.uuid4().hex[:8]}"
    try:
        out = ingest_slice(home, piece, who, folder)
    except BaseException:
        shutil.rmtree(piece.root / folder, ignore_errors=True)
        raise
    tmp = piece.root / f"{folder}.done"
    tmp.write_text(str(out.relative_to(piece.root)))
    try:
        os.link(tmp, _done_marker(piece))  # atomic, and fails if another reading finished first
        return True
    except FileExistsError:
        shutil.rmtree(piece.root / folder, ignore_errors=True)
        return False
    finally:
        tmp.unlink(missing_ok=True)


def offered_slice(task: str, who: str) -> str:
    """A slice another machine offered (``task``: its task file), read here if it is still to be read
    and this machine sees its files as the day's machine saw them and runs the same ingest code; what
    happened, in words. A failure here is left to the day's machine, which reads the slice itself."""
    path = Path(task)
    if not (_TASK.fullmatch(path.name) and _SPLIT.fullmatch(path.parent.name)):
        return f"refused: {task} is not a slice's task file"
    try:
        st = path.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return f"refused: {task} is not this user's, or others may write it"
        home, piece = load_task(path)
    except FileNotFoundError:
        return "nothing to do: its day is over"
    except (ValueError, KeyError, TypeError) as err:  # HandoffVersion among them: another version's task
        return f"declined: {task} is not a task this code reads ({err})"[:500]
    if piece.code != code_stamp():
        return f"declined slice {piece.key} of day {piece.day}: the ingest code here differs from the day's"
    if differing := _files_differ(home, piece):
        return f"declined slice {piece.key} of day {piece.day}: {differing} differs here or cannot be read"
    try:
        if claim_slice(home, piece, who):
            return f"read slice {piece.key} of day {piece.day}"
    except Exception as err:  # the day's machine reads it instead
        return f"failed here, left to the day's machine: slice {piece.key} of day {piece.day}: {err!r}"[:500]
    return f"nothing to do: slice {piece.key} of day {piece.day} is read elsewhere"


def read_slices(
    home: DataHome,
    slices: list[Slice],
    processes: int = 0,
    offer: Offer | None = None,
) -> list[Path]:
    """Phase 2 of every slice; the slices' sealed states, in slice order. Slices are read here in Python
    processes of their own, ``processes`` at a time (0: one per core of this machine); with ``offer`` (by
    default, the process's ``offer_slices_with``), they are also offered to other machines (``offer`` sends
    their task files), and whichever claims a slice first reads it. A slice whose holder died, or went
    silent for ``SILENT_S``, is read again here. The first slice that fails here stops the others and
    raises ``SliceFailed`` naming it, its files and its last error lines."""
    width = processes or os.cpu_count() or 1
    offer = offer or _process_offer
    tasks = []
    for piece in slices:
        tasks.append(piece.root / f"slice-{piece.index}.task.json")
        day_handoff.save_task(tasks[-1], home, piece)
    if offer is not None:
        offer(tasks)
    me = f"{socket.gethostname()}:{os.getpid()}"
    pending = dict(zip([s.index for s in slices], zip(slices, tasks, strict=True), strict=True))
    running: dict[subprocess.Popen, Slice] = {}
    held_since: dict[int, float] = {}
    rescued: set[int] = set()
    try:
        while pending:
            mine = set(running.values())
            for index, (piece, task) in list(pending.items()):
                if _done_marker(piece).exists():
                    del pending[index]
                    continue
                if piece in mine or len(running) >= width:
                    continue
                rescue = False
                if not _free(piece):
                    held_since.setdefault(index, time.monotonic())
                    if index in rescued or not _silent(piece, held_since[index]):
                        continue
                    rescue = True
                    rescued.add(index)
                with open(_error_log(piece), "ab") as err:
                    code = (
                        f"from {__name__} import _slice_process; "
                        f"_slice_process({str(task)!r}, {me!r}, {rescue!r})"
                    )
                    proc = subprocess.Popen(
                        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=err
                    )
                running[proc] = piece
                mine.add(piece)
            time.sleep(POLL_S)
            for proc in [p for p in running if p.poll() is not None]:
                piece = running.pop(proc)
                if (rc := proc.returncode) != 0:
                    how = f"exit code {rc}" if rc > 0 else f"killed by signal {-rc}"
                    lines = _error_log(piece).read_text(errors="replace").strip().splitlines()
                    raise SliceFailed(_failure(home, piece, "\n".join(lines[-SLICE_ERROR_LINES:]), how))
    finally:
        for proc in running:
            proc.kill()
            proc.wait()
    return [piece.root / _done_marker(piece).read_text() for piece in slices]


def _slice_process(task: str, who: str, rescue: bool) -> None:
    threading.Thread(target=_die_with, args=(os.getppid(),), daemon=True).start()
    home, piece = load_task(Path(task))
    who = f"{who} (process {os.getpid()})"
    if rescue:  # its holder went silent: read it beside it, without its claim
        read_attempt(home, piece, who)
    else:
        claim_slice(home, piece, who)


def _die_with(parent: int) -> None:
    """A slice's process ends when the day's process is gone (killed, say): nobody would read its result."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


class _Heartbeat:
    """Touches ``path`` every HEARTBEAT_S while the block runs."""

    def __init__(self, path: Path):
        self.path = path
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def __enter__(self) -> None:
        self.path.touch()
        self.thread.start()

    def _beat(self) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def __exit__(self, *_exc) -> None:
        self.stop.set()
        self.thread.join()


def _silent(piece: Slice, held_since: float) -> bool:
    """The slice's holder showed no life for SILENT_S (its heartbeat, or since its claim was first seen)."""
    try:
        quiet = time.time() - (piece.root / f"slice-{piece.index}.alive").stat().st_mtime
    except FileNotFoundError:
        quiet = time.monotonic() - held_since
    return quiet > SILENT_S


def _free(piece: Slice) -> bool:
    """Nobody holds the slice's claim (it may be taken before this machine's reader takes it). A claim
    that cannot be made at all counts as free: the reader started for it says why."""
    lock = FileLock(piece.root / f"slice-{piece.index}.lock", timeout=0)
    try:
        lock.acquire()
    except LockHeld:
        return False
    except OSError:
        return True
    lock.release()
    return True


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


def _done_marker(piece: Slice) -> Path:
    return piece.root / f"slice-{piece.index}.done"


def _error_log(piece: Slice) -> Path:
    return piece.root / f"slice-{piece.index}.stderr"


def _failure(home: DataHome, piece: Slice, detail: str, how: str) -> str:
    settled = day_handoff.load_settled(home, piece.root / SETTLED)
    names = [settled.book.files[i].lf.relpath for i in piece.files]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    lines = detail.strip().splitlines()[-SLICE_ERROR_LINES:]
    return (
        f"day {piece.day}: slice {piece.key} ({len(names)} files of source {piece.source}: {shown}) "
        f"failed ({how}); nothing of the day was written. Its last error lines:\n"
        + ("\n".join(lines) or "(it wrote no error)")
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

"""The landing folder: one walker that accounts for every entry producers deliver.

Producers deliver ``landing/<source>/<YYYY-MM-DD>/<file>``. Every entry under ``landing/`` is either a
readable landing file of a day, or a landing file with a problem that makes it unreadable (a link out of
the landing folder, a FIFO or other non-regular file, a name that is not UTF-8), or a *misplaced* entry
outside that layout (a ``latest/`` folder, ``20261023/``, ``2026-02-30/``, nested folders, files at the
source or landing root), or a *hidden* entry (a leading ``.``: a writer's file in progress, or a folder
such as ``.eu-west`` or ``...`` whose files no day reads). Misplaced and hidden entries belong to no day;
they are reported, never silently skipped. Ingest, the landing sensor, the monitoring inventory, ``fleet
ingest`` and ``fleet run`` all use this one walker.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipelines.lib.paths import DataHome

Signature = tuple[int, int]  # (mtime_ns, size)


def is_day(text: str) -> bool:
    """``YYYY-MM-DD`` naming a real calendar day."""
    try:
        return len(text) == 10 and dt.date.fromisoformat(text) is not None
    except ValueError:
        return False


def printable(name: str) -> str:
    """A path as people can read it: bytes that are not UTF-8 shown as ``\\xNN``."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class LandingFile:
    """One entry under landing/. ``problem`` is (reason_code, message) when it must not be read."""

    source: str
    day: str | None  # None when the entry is not in a <source>/<YYYY-MM-DD>/ folder
    path: Path
    relpath: str  # relative to the landing root, printable
    problem: tuple[str, str] | None = None
    signature: Signature = (0, 0)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve(strict=True).relative_to(root.resolve())
        return True
    except (ValueError, OSError, RuntimeError):
        return False


def _classify(landing: Path, path: Path, parts: tuple[str, ...]) -> LandingFile:
    rel = printable("/".join(parts))
    source = printable(parts[0]) if len(parts) > 1 else ""
    folder = parts[1] if len(parts) == 3 else None  # <source>/<day>/<file>
    in_layout = folder is not None and is_day(folder)
    day = folder if in_layout else None
    try:
        st = path.lstat()
    except OSError as exc:
        return LandingFile(
            source, day, path, rel, ("file_unreadable", f"{rel}: cannot be read ({exc.strerror})")
        )
    sig = (st.st_mtime_ns, st.st_size)
    if not in_layout:
        return LandingFile(
            source,
            None,
            path,
            rel,
            (
                "file_bad_location",
                f"{rel}: not in a landing/<source>/<YYYY-MM-DD>/ folder, so no day can be given to it; "
                "move it into the folder of the day it belongs to",
            ),
            sig,
        )
    if any(printable(p) != p for p in parts):
        return LandingFile(
            source,
            day,
            path,
            rel,
            ("file_bad_name", f"{rel}: the name is not UTF-8 text; rename it (the escaped bytes are shown)"),
            sig,
        )
    if stat.S_ISLNK(st.st_mode) or not _inside(path.parent, landing):
        if not _inside(path, landing):
            target = os.path.realpath(path)
            return LandingFile(
                source,
                day,
                path,
                rel,
                (
                    "file_outside_landing",
                    f"{rel}: is a link to {printable(target)}, outside the landing folder; "
                    "deliver the file itself",
                ),
                sig,
            )
        st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a folder"
            if stat.S_ISDIR(st.st_mode)
            else "a FIFO"
            if stat.S_ISFIFO(st.st_mode)
            else "not a file"
        )
        return LandingFile(
            source,
            day,
            path,
            rel,
            ("file_not_regular", f"{rel}: is {kind}, not a regular file; only regular files are read"),
            sig,
        )
    return LandingFile(source, day, path, rel, None, (st.st_mtime_ns, st.st_size))


def _linked_day(path: Path, parts: tuple[str, ...]) -> LandingFile:
    rel = printable("/".join(parts)) + "/"
    try:
        st = path.lstat()
        sig = (st.st_mtime_ns, st.st_size)
    except OSError:
        sig = (0, 0)
    return LandingFile(
        printable(parts[0]),
        parts[1],
        path,
        rel,
        (
            "file_outside_landing",
            f"{rel}: the day folder is a link to {printable(os.path.realpath(path))}, outside the landing "
            "folder; nothing in it is read: deliver the day's files themselves",
        ),
        sig,
    )


def _hidden(path: Path, parts: tuple[str, ...], folder: bool) -> LandingFile:
    rel = printable("/".join(parts)) + ("/" if folder else "")
    what = (
        "a hidden folder (leading dot): nothing in it is read; rename it"
        if folder
        else "a hidden file (leading dot), not read: a writer's file still in progress? "
        "rename it when complete"
    )
    try:
        st = path.lstat()
        sig = (st.st_mtime_ns, st.st_size)
    except OSError:
        sig = (0, 0)
    source = printable(parts[0]) if len(parts) > 1 else ""
    return LandingFile(source, None, path, rel, ("file_hidden", f"{rel}: {what}"), sig)


def walk(landing: Path) -> Iterator[LandingFile]:
    """Every entry under ``landing`` that is not a layout folder, classified (a hidden folder is one entry).

    Links are never followed into content: a day folder linked inside the landing folder is listed, one
    linked outside it is one entry (nothing under it listed), a linked file is checked before anything
    reads it.
    """
    if not landing.is_dir():
        return
    stack: list[tuple[Path, tuple[str, ...]]] = [(landing, ())]
    while stack:
        folder, parts = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            sub = (*parts, entry.name)
            path = Path(entry.path)
            if entry.name.startswith("."):
                yield _hidden(path, sub, entry.is_dir(follow_symlinks=False))
                continue
            if len(sub) == 2 and entry.is_symlink() and is_day(entry.name) and not _inside(path, landing):
                yield _linked_day(path, sub)  # one entry: nothing under it is listed or read
                continue
            is_layout_dir = len(sub) < 3 and entry.is_dir(follow_symlinks=len(sub) == 2)
            if (is_layout_dir and (len(sub) == 1 or is_day(entry.name))) or entry.is_dir(
                follow_symlinks=False
            ):
                stack.append((path, sub))  # a layout folder, or a misplaced one whose files are reported
            else:
                yield _classify(landing, path, sub)


def day_files(home: DataHome, day: str) -> list[LandingFile]:
    """The entries of every landing/<source>/<day>/, in delivery order (mtime, then path)."""
    files = [f for f in walk(home.landing) if f.day == day]
    return sorted(files, key=lambda f: (f.signature[0], f.relpath))


def landing_days(home: DataHome) -> list[str]:
    """Every day with a landing/<source>/<day>/ folder (empty or not)."""
    if not home.landing.is_dir():
        return []
    days = {
        d.name
        for s in home.landing.iterdir()
        if s.is_dir() and not s.is_symlink() and not s.name.startswith(".")
        for d in s.iterdir()
        if d.is_dir() and is_day(d.name)
    }
    return sorted(days)


def not_read(home: DataHome) -> list[LandingFile]:
    """Entries no day reads: outside the landing/<source>/<YYYY-MM-DD>/ layout, or hidden."""
    return [f for f in walk(home.landing) if f.day is None]


def not_read_warning(entries: list[LandingFile], shown: int = 5) -> str | None:
    """One line naming the entries no day reads and why (None when there are none)."""
    if not entries:
        return None
    why = {"file_hidden": "hidden", "file_bad_location": "not in a <source>/<YYYY-MM-DD>/ folder"}
    codes = [e.problem[0] if e.problem else "unread" for e in entries[:shown]]
    listed = ", ".join(f"{e.relpath} ({why.get(c, c)})" for e, c in zip(entries[:shown], codes, strict=True))
    more = f" and {len(entries) - shown} more" if len(entries) > shown else ""
    n = f"{len(entries)} landing entr{'y is' if len(entries) == 1 else 'ies are'}"
    return (
        f"{n} read by no day: {listed}{more}; move each file into the folder of its day "
        "(a hidden name is a file still being written)"
    )


def inventory(home: DataHome) -> dict[str, Signature]:
    """Signatures of every entry of every day folder, keyed by path relative to landing/."""
    return {f.relpath: f.signature for f in walk(home.landing) if f.day is not None}

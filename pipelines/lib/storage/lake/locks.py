"""Locks that hold across processes and machines sharing a lake: a file lock in a local lake, a lease
object in object storage (created with a conditional write, so exactly one writer gets it; a lease a dead
holder left expires, or is taken over at once when its holder was a process of this machine that is gone)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator

from filelock import FileLock
from filelock import Timeout as FileLockTimeout

from pipelines.lib.procs import this_worker, worker_alive

LEASE_S = 600  # a lease older than this is a dead holder's: taken over


class LockTimeout(TimeoutError):
    """The lock stayed held longer than the caller would wait."""


NOTICE_S = 2.0  # a wait longer than this is said, in one line naming the holder
log = logging.getLogger("fleet.lake")


@contextlib.contextmanager
def lock(lake, name: str, timeout_s: float, lease_s: float = LEASE_S) -> Iterator[None]:
    if not lake.remote:
        with _file_lock(f"{lake.uri}/_locks", name, timeout_s):
            yield
        return
    with _lease(lake, name, timeout_s, lease_s):
        yield


def _me() -> str:
    since = time.strftime("%H:%M:%S UTC", time.gmtime())
    return f"process {os.getpid()} on {socket.gethostname()}, since {since}"


def _lease_holder(holder: str) -> str:
    """A lease's holder (``host:pid:start:holding``) as a person reads it."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    return f"process {pid} on {host}" if pid.isdigit() else repr(holder)


def _waiting(name: str, holder: str) -> None:
    log.warning(f"waiting for the lake's lock {name!r}, held by {holder} ...")


@contextlib.contextmanager
def _file_lock(folder: str, name: str, timeout_s: float) -> Iterator[None]:
    """The lock file's lock (released by the OS when its holder dies); beside it, who holds it."""
    os.makedirs(folder, exist_ok=True)
    path = f"{folder}/{name}.lock"
    holder_path = f"{folder}/{name}.holder"

    def holder() -> str:
        try:
            with open(holder_path, encoding="utf-8") as f:
                return f.read().strip() or "another process"
        except OSError:
            return "another process"

    fl = FileLock(path)
    try:
        try:
            fl.acquire(timeout=min(NOTICE_S, timeout_s))
        except FileLockTimeout:
            _waiting(name, holder())
            fl.acquire(timeout=max(timeout_s - NOTICE_S, 0))
    except FileLockTimeout:
        raise LockTimeout(
            f"the lake's lock {name!r} stayed held for {timeout_s:.0f} s by {holder()}"
        ) from None
    try:
        tmp = f"{holder_path}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(_me())
        os.replace(tmp, holder_path)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(holder_path)
        fl.release()


@contextlib.contextmanager
def _lease(lake, name: str, timeout_s: float, lease_s: float) -> Iterator[None]:
    from pipelines.lib.storage.lake.s3 import fsspec_fs

    fs = fsspec_fs()
    bucket, _, prefix = lake.uri[5:].partition("/")
    key = f"{prefix}/_locks/{name}.lock".lstrip("/")
    me = f"{this_worker()}:{uuid.uuid4().hex[:8]}"  # the process, and this holding of it
    deadline = time.monotonic() + timeout_s
    told = False
    while True:
        body = json.dumps({"holder": me, "expires": time.time() + lease_s}).encode()
        try:
            fs.call_s3("put_object", Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
            break
        except OSError:  # held: take it over only once it has expired
            try:
                held = json.loads(fs.cat_file(f"{bucket}/{key}"))
            except (FileNotFoundError, ValueError):
                continue
            holder = str(held.get("holder", ""))
            # expired, or its holder is a process of this machine that is gone (killed): no wait for expiry
            if held.get("expires", 0) < time.time() or worker_alive(holder.rpartition(":")[0]) is False:
                with contextlib.suppress(FileNotFoundError):
                    fs.rm(f"{bucket}/{key}")
                continue
            until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(held.get("expires", 0)))
            if time.monotonic() > deadline:
                raise LockTimeout(
                    f"the lake's lock {name!r} stayed held for {timeout_s:.0f} s by {_lease_holder(holder)} "
                    f"(its lease runs until {until})"
                ) from None
            if not told and time.monotonic() > deadline - timeout_s + NOTICE_S:
                _waiting(name, f"{_lease_holder(holder)} (its lease runs until {until})")
                told = True
            time.sleep(0.5)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            held = json.loads(fs.cat_file(f"{bucket}/{key}"))
            if held.get("holder") == me:
                fs.rm(f"{bucket}/{key}")

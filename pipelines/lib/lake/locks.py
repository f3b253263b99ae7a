"""Locks that hold across processes and machines sharing a lake: a file lock in a local lake, a lease
object in object storage (created with a conditional write, so exactly one writer gets it; a lease a dead
holder left expires, or is taken over at once when its holder was a process of this machine that is gone)."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator

from filelock import FileLock
from filelock import Timeout as FileLockTimeout

from pipelines.lib.procs import this_worker, worker_alive

LEASE_S = 600  # a lease older than this is a dead holder's: taken over


class LockTimeout(TimeoutError):
    """The lock stayed held longer than the caller would wait."""


@contextlib.contextmanager
def lock(lake, name: str, timeout_s: float, lease_s: float = LEASE_S) -> Iterator[None]:
    if not lake.remote:
        folder = f"{lake.uri}/_locks"
        os.makedirs(folder, exist_ok=True)
        try:
            with FileLock(f"{folder}/{name}.lock", timeout=timeout_s):
                yield
        except FileLockTimeout:
            raise LockTimeout(f"the lake's lock {name!r} stayed held for {timeout_s:.0f} s") from None
        return
    with _lease(lake, name, timeout_s, lease_s):
        yield


@contextlib.contextmanager
def _lease(lake, name: str, timeout_s: float, lease_s: float) -> Iterator[None]:
    from pipelines.lib.lake.s3 import fsspec_fs

    fs = fsspec_fs()
    bucket, _, prefix = lake.uri[5:].partition("/")
    key = f"{prefix}/_locks/{name}.lock".lstrip("/")
    me = f"{this_worker()}:{uuid.uuid4().hex[:8]}"  # the process, and this holding of it
    deadline = time.monotonic() + timeout_s
    while True:
        body = json.dumps({"holder": me, "expires": time.time() + lease_s}).encode()
        try:
            fs.call_s3("put_object", Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
            break
        except OSError:  # held: take it over only once it has expired
            try:
                held = json.loads(fs.cat(f"{bucket}/{key}"))
            except (FileNotFoundError, ValueError):
                continue
            holder = str(held.get("holder", ""))
            # expired, or its holder is a process of this machine that is gone (killed): no wait for expiry
            if held.get("expires", 0) < time.time() or worker_alive(holder.rpartition(":")[0]) is False:
                with contextlib.suppress(FileNotFoundError):
                    fs.rm(f"{bucket}/{key}")
                continue
            if time.monotonic() > deadline:
                until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(held.get("expires", 0)))
                raise LockTimeout(
                    f"the lake's lock {name!r} stayed held for {timeout_s:.0f} s by {holder} "
                    f"(its lease runs until {until})"
                ) from None
            time.sleep(0.5)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            held = json.loads(fs.cat(f"{bucket}/{key}"))
            if held.get("holder") == me:
                fs.rm(f"{bucket}/{key}")

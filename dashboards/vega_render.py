"""Charts rendered to SVG and PNG in helper processes, one per core: vl_convert holds the GIL while it runs
Vega, so threads would not spread the renders, and a helper's start (Vega's runtime, 0.3 s) overlaps the
report's queries and chart building.

A helper is this module run as ``python -m dashboards.vega_render``: it reads one job per line on stdin
(``<spec.json> <svg> <png>``, paths), writes the SVG and the PNG rasterised from it (atomically), and
answers one line per job: ``ok``, ``error <message>``, or ``oserror [errno, strerror, filename]`` (a failure
of the machine, such as a full disk, which the report's process raises as the same OSError).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType

import dashboards

PNG_SCALE = 1.5
MAX_HELPERS = 4
MAX_MESSAGE = 400  # characters of a helper's error kept (Vega's own run long with its stack)


class RenderError(RuntimeError):
    """A chart could not be rendered (its name and the renderer's message)."""


class Renderers:
    """Helper processes that render charts; ``submit`` queues a chart, ``wait`` returns once every queued
    chart is written (or raises RenderError naming the first that failed). Use as a context manager: the
    helpers are stopped on exit."""

    def __init__(self, helpers: int | None = None):
        cores = len(os.sched_getaffinity(0))
        self.size = max(1, min(helpers or cores, MAX_HELPERS))
        self._tmp = tempfile.TemporaryDirectory(prefix="vega-")
        root = str(Path(dashboards.__file__).resolve().parents[1])
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
        }
        self._procs: list[subprocess.Popen] = []
        try:
            for _ in range(self.size):
                self._procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "dashboards.vega_render"],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        env=env,
                        text=True,
                        bufsize=1,
                    )
                )
        except BaseException:  # the helpers already started are stopped
            self.close()
            raise
        self._queued: list[list[str]] = [[] for _ in self._procs]  # chart names, in order, per helper
        self._load = [0] * self.size  # bytes of spec queued per helper: the next chart goes to the least
        self._jobs = itertools.count()

    def submit(self, name: str, spec: dict, svg: Path, png: Path) -> None:
        text = json.dumps(spec)
        path = Path(self._tmp.name) / f"{next(self._jobs)}.json"
        path.write_text(text, encoding="utf-8")
        i = self._load.index(min(self._load))
        self._load[i] += len(text)
        self._queued[i].append(name)
        proc = self._procs[i]
        assert proc.stdin is not None
        try:
            proc.stdin.write(f"{json.dumps([str(path), str(svg), str(png)])}\n")
        except OSError:  # the helper is gone
            raise RenderError(f"chart {name!r} could not be rendered: {self._gone(proc)}") from None

    def wait(self) -> None:
        for proc, names in zip(self._procs, self._queued, strict=True):
            assert proc.stdout is not None
            for name in names:
                answer = proc.stdout.readline().rstrip("\n")
                if answer.startswith("oserror "):  # the machine's failure (a full disk): raised as it was
                    raise OSError(*json.loads(answer.removeprefix("oserror ")))
                if answer != "ok":
                    why = answer.removeprefix("error ") or self._gone(proc)
                    raise RenderError(f"chart {name!r} could not be rendered: {why}")
            names.clear()
        self._load = [0] * self.size

    @staticmethod
    def _gone(proc: subprocess.Popen) -> str:
        return f"the renderer exited ({proc.wait()})"

    def close(self, abandon: bool = False) -> None:
        """Stop the helpers: at the end of their input (each finishes its queued charts), or at once when
        the report is ``abandon``ed (an error or a signal stopped it: no chart is written after that)."""
        for proc in self._procs:
            if abandon and proc.poll() is None:
                proc.kill()
            if proc.stdin is not None and not proc.stdin.closed:
                with contextlib.suppress(OSError):  # a helper that died has nobody reading
                    proc.stdin.close()  # the helper ends at end of input
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        self._tmp.cleanup()

    def __enter__(self) -> Renderers:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(abandon=kind is not None)


def render(spec: dict, svg: Path, png: Path) -> None:
    """One chart: its SVG, and the PNG that rasterises that SVG (the same bytes as vegalite_to_png without
    running Vega again)."""
    import vl_convert

    from pipelines.lib import fileio

    drawing = vl_convert.vegalite_to_svg(spec)
    fileio.write_text(svg, drawing)
    fileio.write_bytes(png, vl_convert.svg_to_png(drawing, scale=PNG_SCALE))


def _serve() -> None:
    import vl_convert

    # Ctrl-C reaches the whole process group: the report's process decides, and its helpers end when it
    # closes their input (a KeyboardInterrupt here would only print a traceback per helper)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    # start Vega's runtime while the report is still being built
    vl_convert.vegalite_to_svg({"mark": "point", "data": {"values": [{"x": 0}]}})
    for line in sys.stdin:
        try:
            spec_path, svg, png = json.loads(line)
            render(json.loads(Path(spec_path).read_text(encoding="utf-8")), Path(svg), Path(png))
            answer = "ok"
        except Exception as exc:  # reported to the report's process, which names the chart
            if isinstance(exc, OSError) and exc.errno is not None:
                answer = "oserror " + json.dumps([exc.errno, exc.strerror, exc.filename])
            else:
                answer = "error " + " ".join(f"{type(exc).__name__}: {exc}".split())[:MAX_MESSAGE]
        try:
            sys.stdout.write(answer + "\n")
            sys.stdout.flush()
        except BrokenPipeError:  # the report's process is gone (killed, or ended abruptly): so is its job
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at shutdown
            sys.exit(1)


if __name__ == "__main__":
    _serve()

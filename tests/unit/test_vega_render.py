"""The report's chart renderers (helper processes): the same bytes as rendering in process, and a chart that
cannot be rendered, or a helper that dies, is an error naming the chart, never a missing file."""

import json
import signal
import subprocess
import sys
import time

import pytest
import vl_convert

from dashboards.vega_render import PNG_SCALE, RenderError, Renderers


def _spec(n: int) -> dict:
    return {
        "data": {"values": [{"x": i, "y": i * i % 7} for i in range(n)]},
        "mark": "bar",
        "encoding": {"x": {"field": "x", "type": "ordinal"}, "y": {"field": "y", "type": "quantitative"}},
    }


def test_charts_render_in_helpers_exactly_as_in_process(tmp_path):
    specs = {f"chart{n}": _spec(n) for n in (3, 10, 30, 5)}
    with Renderers(helpers=2) as renderers:
        assert renderers.size == 2
        for name, spec in specs.items():
            renderers.submit(name, spec, tmp_path / f"{name}.svg", tmp_path / f"{name}.png")
        renderers.wait()
    for name, spec in specs.items():
        svg = vl_convert.vegalite_to_svg(json.loads(json.dumps(spec)))
        assert (tmp_path / f"{name}.svg").read_text(encoding="utf-8") == svg
        assert (tmp_path / f"{name}.png").read_bytes() == vl_convert.svg_to_png(svg, scale=PNG_SCALE)
    assert not list(tmp_path.glob(".*"))  # no temporaries left


def test_a_chart_that_cannot_be_rendered_is_named(tmp_path):
    bad = {"mark": "no-such-mark", "data": {"values": []}}
    with Renderers(helpers=1) as renderers:
        renderers.submit("good", _spec(3), tmp_path / "good.svg", tmp_path / "good.png")
        renderers.submit("broken", bad, tmp_path / "broken.svg", tmp_path / "broken.png")
        with pytest.raises(
            RenderError,
            match="chart 'broken' could not be rendered: ValueError: Vega-Lite to SVG conversion failed",
        ):
            renderers.wait()
    assert (tmp_path / "good.svg").exists() and not (tmp_path / "broken.svg").exists()


def test_a_helper_that_dies_is_an_error_naming_the_chart(tmp_path):
    with Renderers(helpers=1) as renderers:
        renderers._procs[0].kill()
        renderers._procs[0].wait()
        with pytest.raises(
            RenderError, match=r"chart 'lost' could not be rendered: the renderer exited \(-9\)"
        ):
            renderers.submit("lost", _spec(3), tmp_path / "lost.svg", tmp_path / "lost.png")
            renderers.wait()


def test_helpers_already_started_are_stopped_when_one_cannot_start(monkeypatch):
    started = []
    real = subprocess.Popen

    def popen(*args, **kwargs):
        if started:
            raise OSError("no more processes")
        started.append(real(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", popen)
    with pytest.raises(OSError, match="no more processes"):
        Renderers(helpers=2)
    assert len(started) == 1 and started[0].returncode is not None


def test_a_failure_of_the_machine_is_raised_as_the_same_oserror(tmp_path):
    """A full disk or an unwritable folder is the machine's failure, not the chart's: the caller gets the
    OSError (the CLI prints it as one line naming its cause)."""
    from pipelines.lib import fileio

    (tmp_path / "file").write_text("not a folder")
    target = tmp_path / "file" / "chart.svg"
    with pytest.raises(OSError) as here:  # what writing it in this process raises
        fileio.write_text(target, "<svg/>")
    with Renderers(helpers=1) as renderers:
        renderers.submit("c", _spec(3), target, tmp_path / "file" / "chart.png")
        with pytest.raises(OSError) as caught:
            renderers.wait()
    assert type(caught.value) is type(here.value)
    assert (caught.value.errno, caught.value.strerror, caught.value.filename) == (
        here.value.errno,
        here.value.strerror,
        here.value.filename,
    )


def _helper_with_one_job(tmp_path) -> tuple[subprocess.Popen, str]:
    """A helper started as Renderers starts one, its stderr captured; and the line of one chart's job."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_spec(3)), encoding="utf-8")
    helper = subprocess.Popen(
        [sys.executable, "-m", "dashboards.vega_render"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return helper, json.dumps([str(spec), str(tmp_path / "c.svg"), str(tmp_path / "c.png")]) + "\n"


def test_a_helper_whose_report_process_is_gone_ends_quietly(tmp_path):
    """A killed report's helpers have no reader for their answer: they end without a traceback on the
    stderr they share with the user's terminal."""
    helper, job = _helper_with_one_job(tmp_path)
    helper.stdout.close()  # the reader is gone before the helper can answer
    helper.stdin.write(job)
    helper.stdin.close()
    err = helper.stderr.read()
    assert helper.wait(timeout=60) == 1
    assert err == ""


def test_a_helper_ignores_ctrl_c_and_ends_when_its_input_does(tmp_path):
    """Ctrl-C in the terminal reaches every helper of the report's process group: they print nothing and
    end when the report's process closes their input."""
    helper, job = _helper_with_one_job(tmp_path)
    helper.stdin.write(job)
    helper.stdin.flush()
    assert helper.stdout.readline() == "ok\n"  # started, waiting on its input
    helper.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert helper.poll() is None
    helper.stdin.close()
    assert helper.wait(timeout=60) == 0
    assert helper.stderr.read() == ""


def test_a_stopped_report_stops_its_helpers_at_once_and_writes_no_more_charts(tmp_path):
    """An error or a signal (KeyboardInterrupt, Dagster's termination) while charts are queued: the helpers
    are killed, not left to render the queue into the report's folder after the report has stopped."""
    with pytest.raises(KeyboardInterrupt), Renderers(helpers=1) as renderers:
        procs = list(renderers._procs)
        for k in range(8):
            renderers.submit(f"c{k}", _spec(300), tmp_path / f"c{k}.svg", tmp_path / f"c{k}.png")
        raise KeyboardInterrupt
    assert [p.returncode for p in procs] == [-9]
    assert len(list(tmp_path.glob("*.svg"))) < 8

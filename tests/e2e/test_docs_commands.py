"""The commands the README's tour and the first-night tutorial print run as printed, on a demo's data home:
a reader pastes them after `make demo`, so each must exit 0 and answer."""

from __future__ import annotations

import re
import shlex

import pytest

from pipelines.lib.paths import PROJECT_ROOT
from tests.support.cli import BIN

PAGES = ("README.md", "docs/tutorials/first-night.md")
# Not runnable in a test: a server that runs until stopped, a browser, a team's Prometheus, a placeholder
# date; and the examples' own home, which tests/e2e/test_examples.py ingests.
SKIP = re.compile(r"^\.venv/bin/fleet (ui\b|.*--url |.*YYYY-|.*--home my_data)")


def _commands(page: str) -> list[str]:
    text = (PROJECT_ROOT / page).read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = [re.split(r"\s#", line, maxsplit=1)[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith(".venv/bin/fleet ") and not SKIP.match(line)]


def test_the_pages_show_commands_to_run():
    for page in PAGES:
        assert len(_commands(page)) >= 5, page


@pytest.mark.parametrize("page", PAGES)
def test_each_printed_command_runs_on_a_demo_home(page, demo_home, fleet_cli):
    # The demo's own home, not a copy: its catalog's views read its lake's files by path, and `fleet sql`
    # reads no other file. The pages' `fleet run` finds nothing changed and leaves the home as it was.
    home = demo_home[0].root
    for line in _commands(page):
        argv = [str(BIN / "fleet"), *shlex.split(line)[1:]]
        p = fleet_cli(argv, env={"FLEET_HOME": str(home), "DAGSTER_HOME": ""})
        assert p.returncode == 0, (page, line, p.stderr[-2000:])
        assert p.stdout.strip(), (page, line)

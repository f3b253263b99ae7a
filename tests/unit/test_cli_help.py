"""Every option of every `fleet` command says what it is and its default."""

import pytest

from pipelines.cli.parser import build_parser


@pytest.mark.parametrize(
    "command",
    ["demo", "synth", "run", "ingest", "query", "report", "calibrate", "whatif", "recommend", "waste", "ui"],
)
def test_every_option_is_described(command):
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    for action in sub._actions:
        if action.dest == "help":
            continue
        assert action.help, f"fleet {command} {action.option_strings or action.dest} has no help"
        if action.default not in (None, False):
            assert str(action.default) in action.help, f"{action.dest}: default not shown"

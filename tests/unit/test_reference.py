"""The docs site's reference pages say what the sources say: every subcommand and option, table and column,
view and canned query, catalog field, setting, exit code and reason code (pipelines/reference/)."""

from __future__ import annotations

import argparse
import ast
import re
import tokenize
from functools import cache
from pathlib import Path

import pytest

from pipelines.cli.parser import build_parser
from pipelines.lib import settings
from pipelines.lib.contracts import contract, contracts
from pipelines.lib.exit_codes import ExitCode
from pipelines.lib.ingest.prometheus import mapping
from pipelines.lib.paths import PROJECT_ROOT
from pipelines.lib.query.queries import canned
from pipelines.reference import catalogs, cli, codes, pages, tables, views
from workload_model.catalog import hardware_fields, hardware_schema, model_entry_fields

# An environment variable's name is text: a string the code reads it by, or a message or comment naming it
# (a Python name such as calibration.FLEET_TARGETS is not one).
FLEET_VARIABLE = re.compile(r"FLEET_[A-Z][A-Z0-9_]*[A-Z0-9]")
TEXT_TOKENS = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}


@cache
def page(name: str) -> str:
    return pages()[f"reference/{name}.md"]


def test_every_page_is_generated_with_a_title():
    assert sorted(pages()) == sorted(
        f"reference/{p}.md"
        for p in ("cli", "tables", "views", "catalogs", "settings", "exit-codes", "reason-codes")
    )
    assert all(text.startswith("# ") and text.endswith("\n") for text in pages().values())


def test_the_generators_do_no_work_on_import():
    """Only imports, definitions and constants (a compiled regex at most) at module level: a page is built
    when asked for."""
    for path in (PROJECT_ROOT / "pipelines" / "reference").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Expr | ast.Assign | ast.AnnAssign):
                calls = [
                    n
                    for n in ast.walk(node)
                    if isinstance(n, ast.Call) and ast.unparse(n.func) != "re.compile"
                ]
                assert not calls, f"{path.name}:{node.lineno} calls at import"
            else:
                assert isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef), (
                    f"{path.name}:{node.lineno}"
                )


# ---------------------------------------------------------------- CLI


def test_every_subcommand_and_option_is_on_the_cli_page():
    text = page("cli")
    assert "`-h`/`--help`" in text
    subs = cli.subcommands(build_parser())
    assert set(subs) >= {"demo", "run", "ingest", "worker", "query", "sql", "whatif", "recommend", "waste"}
    for name, (summary, sub) in subs.items():
        section = text.split(f"## `fleet {name}`", 1)[1].split("\n## ", 1)[0]
        assert summary[1:] in section and f"usage: fleet {name}" in section, name
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            names = action.option_strings or [(action.metavar or action.dest).upper()]
            row = next(line for line in section.splitlines() if line.startswith(f"| `{names[0]}`"))
            assert all(f"`{o}`" in row for o in names), (name, names)
            for choice in action.choices or ():
                assert f"`{choice}`" in row, (name, names, choice)
            if action.default not in (None, False):
                assert f"`{action.default}`" in row, (name, names)


def test_help_is_shown_as_argparse_prints_it():
    action = next(a for a in cli.subcommands(build_parser())["worker"][1]._actions if a.dest == "name")
    assert cli.expanded_help(action, "fleet worker") == "the worker's name (default fleet@%h: this host)"


# ---------------------------------------------------------------- tables


def _sections(text: str, level: str = "## ") -> dict[str, str]:
    return dict(re.findall(rf"^{level}`(\w+)`[^\n]*\n(.*?)(?=^{level}|^## |\Z)", text, re.M | re.S))


def test_every_table_and_column_is_on_the_tables_page():
    sections = _sections(page("tables"))
    assert set(sections) == set(contracts())
    for name, c in contracts().items():
        rows = re.findall(r"^\| `(\w+)` \| (\w+) \(", sections[name], re.M)
        assert rows == [(col.name, col.type) for col in c.columns], name
        assert tables.markdown().count(f"](#{name})") == 1, name  # in the index once
    util = sections["util_summary"]
    assert "| `p90_util` | float64 (DOUBLE) | no | fraction | 0 .. 1 |" in util and r"'\*'" in util
    assert "| `start_ts` | timestamp (TIMESTAMPTZ) | yes | UTC | 2000-01-01T00:00:00Z .. " in sections["runs"]


def test_the_tables_page_says_what_each_described_value_means():
    quarantine = _sections(page("tables"))["quarantine"]
    for value, meaning in contract("quarantine").column("reason_code").described_values.items():
        assert f"- `{value}`: " in quarantine and meaning.split("(")[0].strip() in quarantine, value


# ---------------------------------------------------------------- views and canned queries


def test_every_view_of_the_catalog_and_every_canned_query_is_on_the_views_page():
    text = page("views")
    found = views.catalog_views()
    assert {v.name for v in found} >= set(contracts())  # a view per table, and any other view the catalog has
    sections = _sections(text, "### ")
    for v in found:
        assert v.comment and v.comment[:40] in sections[v.name], v.name
        assert [c for c, _, _ in v.columns] == re.findall(r"^\| `(\w+)` \| `", sections[v.name], re.M), v.name
    assert all(comment for v in found for _, _, comment in v.columns)
    for q in canned().values():
        assert f"### `{q.name}` {{#query-{q.name}}}" in text and q.description[:40] in text, q.name
        for p in [*q.defaults, *q.constants]:
            assert f"| `{p}` |" in sections[q.name], (q.name, p)


# ---------------------------------------------------------------- catalogs


def test_every_catalog_field_is_on_the_catalogs_page():
    text = page("catalogs")
    hardware, rest = text.split("## Model catalog")
    models, prometheus = rest.split("## Prometheus mapping")
    for name in hardware_fields():
        assert f"| `{name}` |" in hardware, name
    for name in mapping.fields():
        assert f"| `{name}` |" in prometheus, name
    required, optional = model_entry_fields()
    for name in required:
        assert f"| `{name}` | yes |" in models, name
    for name in optional:
        assert f"| `{name}` | no |" in models, name


def test_every_hardware_field_has_a_documented_model_use():
    uses = hardware_schema()["model_uses"]
    assert all(f["model"] in uses for f in hardware_fields().values())
    assert all(f"- `{u}`: " in catalogs.hardware() for u in uses)


# ---------------------------------------------------------------- settings


def _variables_named_in(path: Path) -> set[str]:
    if path.suffix != ".py":
        return set(FLEET_VARIABLE.findall(path.read_text(encoding="utf-8", errors="replace")))
    with path.open("rb") as fh:
        return {
            v
            for t in tokenize.tokenize(fh.readline)
            if t.type in TEXT_TOKENS
            for v in FLEET_VARIABLE.findall(t.string)
        }


def test_every_fleet_variable_the_code_names_is_on_the_settings_page():
    named = set()
    for folder in ("pipelines", "workload_model", "synthetic_fleet", "dashboards"):
        for path in (PROJECT_ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                named |= _variables_named_in(path)
    assert {"FLEET_HOME", "FLEET_BROKER", "FLEET_ALERT_WEBHOOK_URL", "FLEET_SLICE_BYTES"} <= named
    text = page("settings")
    missing = sorted(v for v in named if f"| `{v}` |" not in text)
    assert not missing, f"name them in a Setting of pipelines/lib/settings.py: {missing}"
    declared = [s.env for s in settings.SETTINGS]
    assert len(declared) == len(set(declared)) and all(f"| `{v}` |" in text for v in declared)


def test_the_limits_are_read_by_their_records():
    assert list(settings.LIMITS) == list(settings.IngestLimits.__dataclass_fields__)
    env = {s.env: "2GB" if name == "duckdb_memory" else "123456789" for name, s in settings.LIMITS.items()}
    limits = settings.IngestLimits.resolve(env)
    assert all(getattr(limits, name) in (123456789, "2GB") for name in settings.LIMITS)
    assert settings.IngestLimits() == settings.IngestLimits.resolve({})


def test_every_settings_flag_is_an_option_of_fleet():
    flags = {
        o
        for _, sub in cli.subcommands(build_parser()).values()
        for a in sub._actions
        for o in a.option_strings
    }
    assert all(s.flag in flags for s in settings.SETTINGS if s.flag)


# ---------------------------------------------------------------- exit and reason codes


@pytest.mark.parametrize("code", list(ExitCode))
def test_every_exit_code_is_on_its_page(code):
    assert f"| {int(code)} | `{code.name.lower()}` | {code.__doc__.split('.')[0]}" in page("exit-codes")


def test_every_reason_code_has_a_meaning_and_a_kind():
    text = page("reason-codes")
    found = codes.reason_codes()
    assert set(found) == set(contract("quarantine").column("reason_code").enum)
    for reason, (kind, meaning) in found.items():
        assert len(meaning) > 20 and kind in ("row", "file"), reason
        section = text.split(f"## {kind.capitalize()} faults", 1)[1].split("\n## ", 1)[0]
        assert f"| `{reason}` | {meaning[:30]}" in section, reason

"""A read-only SQL shell over the analyst catalog, on the DuckDB 2 engine the project installs: what
`fleet sql` runs. The DuckDB command-line client that reads this catalog's format (2.x) is not in the package
registries this product installs from (PyPI's duckdb-cli is 1.5.6 and cannot open the file)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb

from pipelines.lib.query.render import plain_table
from pipelines.lib.storage.lake import Lake

MAX_ROWS = 1000  # rows printed per statement (the rest are counted)
# Lines of an engine message shown: its first, then its hint ('Did you mean "gpu_util"?', 'Candidate
# bindings: ...') or the statement's line with a caret; a list of candidate functions can run to dozens.
MESSAGE_LINES = 4
DOT_COMMANDS = {
    ".tables": "SELECT view_name AS view, comment FROM duckdb_views() WHERE NOT internal ORDER BY 1",
}


class SqlError(Exception):
    """A statement the engine refused (its message says why)."""


def _message(exc: duckdb.Error) -> SqlError:
    """The engine's message, its hint kept: its first MESSAGE_LINES lines, then how many more it had."""
    lines = [line.rstrip() for line in str(exc).splitlines() if line.strip()]
    cut = len(lines) - MESSAGE_LINES
    return SqlError("\n".join(lines[:MESSAGE_LINES] + ([f"... {cut} more lines"] if cut > 0 else [])))


# What the shell runs: statements that read. COPY, EXPORT, ATTACH, SET, PRAGMA, INSTALL/LOAD and DDL are not.
READ_STATEMENTS = frozenset(
    {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN, duckdb.StatementType.CALL}
)


def connect(catalog: Path, store: Lake) -> duckdb.DuckDBPyConnection:
    """The catalog, read-only (the pipeline swaps in a new file and never waits for this session), reading
    no file but the lake's: its views read them (on object storage through a registered filesystem).
    Neither can be changed back from the session."""
    con = duckdb.connect(str(catalog), read_only=True)
    store.duckdb(con)
    lake_dir = store.uri.rstrip("/") + "/"
    con.execute(f"SET allowed_directories = [{_literal(lake_dir)}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def _literal(text: str) -> str:
    """``text`` as a SQL string literal (SET takes no bound parameters)."""
    return "'" + text.replace("'", "''") + "'"


def statements(text: str, con: duckdb.DuckDBPyConnection) -> list[str]:
    """The statements of ``text`` as the engine splits them (a ';' inside a string stays in it); a
    statement that does not only read is refused before any runs."""
    command = text.strip().rstrip(";")
    if command in DOT_COMMANDS:
        return [DOT_COMMANDS[command]]
    try:
        parsed = con.extract_statements(text)
    except duckdb.Error as exc:
        raise _message(exc) from None
    for s in parsed:
        if s.type not in READ_STATEMENTS:
            kind = s.type.name
            raise SqlError(
                "the SQL shell is read-only: it runs SELECT, EXPLAIN and CALL of a table function, "
                f"not {kind} ({' '.join(s.query.split())[:80]})"
            )
    return [s.query for s in parsed]


def run(con: duckdb.DuckDBPyConnection, text: str) -> Iterator[str]:
    """Each statement's result as a plain aligned table (``SqlError`` at the first that fails)."""
    for query in statements(text, con):
        try:
            rel = con.sql(query)
            if rel is None:
                yield "ok"
                continue
            frame = rel.limit(MAX_ROWS + 1).pl()
        except duckdb.Error as exc:
            raise _message(exc) from None
        more = frame.height > MAX_ROWS
        yield plain_table(frame.head(MAX_ROWS)) + (
            f"; more rows not shown (the first {MAX_ROWS})" if more else ""
        )


def interactive(
    con: duckdb.DuckDBPyConnection, read: Callable[[str], str], write: Callable[[str], None]
) -> None:
    """Read statements (a line ending with ';' runs them; ``.tables``; ``.quit`` or end of input ends)."""
    buffer: list[str] = []
    while True:
        try:
            line = read("fleet> " if not buffer else "   ...> ")
        except EOFError:
            return
        if not buffer and line.strip() in (".quit", ".exit"):
            return
        buffer.append(line)
        text = "\n".join(buffer).strip()
        if text in DOT_COMMANDS or text.endswith(";"):
            buffer.clear()
            try:
                for out in run(con, text):
                    write(out)
            except SqlError as exc:
                write(f"Error: {exc}")

"""mkdocs-gen-files: the measured tables, from the records kept in docs/measurements/ (benchmark runs on the
performance page, `fleet calibrate --json` on the accuracy page)."""

import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import tables
from pipelines.lib.analysis import accuracy_tables

DOCS = Path(__file__).parent


def fill(page: str, mark: str, body: str) -> None:
    text = (DOCS / page).read_text()
    if mark not in text:
        raise SystemExit(f"{page}: no {mark!r} to fill")
    with mkdocs_gen_files.open(page, "w") as out:
        out.write(text.replace(mark, body))


bench = "\n".join(tables.markdown(r) for r in tables.records())
fill(
    "explanation/performance.md",
    "<!-- benchmark records, generated -->",
    bench or "No benchmark record is kept in `docs/measurements/` yet.",
)
fill(
    "explanation/accuracy.md",
    "<!-- calibration record, generated -->",
    accuracy_tables.markdown(accuracy_tables.recorded()),
)

"""docs/data-dictionary.md says what the contracts say: every table and column, with type, unit and bounds."""

import re

from pipelines.lib import data_dictionary
from pipelines.lib.contracts import contracts


def test_the_data_dictionary_is_current():
    assert data_dictionary.DOC.read_text(encoding="utf-8") == data_dictionary.markdown(), (
        "regenerate: python -m pipelines.lib.data_dictionary"
    )


def test_every_table_and_column_is_in_the_data_dictionary():
    page = data_dictionary.markdown()
    sections = dict(re.findall(r"^## `(\w+)`\n(.*?)(?=^## |\Z)", page, re.M | re.S))
    assert set(sections) == set(contracts())
    for name, c in contracts().items():
        rows = re.findall(r"^\| `(\w+)` \| (\w+) \(", sections[name], re.M)
        assert rows == [(col.name, col.type) for col in c.columns], name
    util = sections["util_summary"]
    assert "| `p90_util` | float64 (DOUBLE) | no | fraction | 0 .. 1 |" in util and "'*'" in util
    assert "| `start_ts` | timestamp (TIMESTAMPTZ) | yes | UTC | 2000-01-01T00:00:00Z .. " in sections["runs"]

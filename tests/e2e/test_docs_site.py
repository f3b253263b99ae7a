"""The docs site builds strictly (a broken link, anchor or a page left out of the navigation fails it), with
its reference pages generated from the sources and the performance page's tables from the kept records."""

from __future__ import annotations

import json

from pipelines.lib.paths import PROJECT_ROOT
from tests.support.cli import BIN


def test_the_site_builds_strictly_with_its_generated_pages(fleet_cli, tmp_path):
    site = tmp_path / "site"
    p = fleet_cli(
        [str(BIN / "mkdocs"), "build", "--strict", "-d", str(site)],
        env={"DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"},
    )
    assert p.returncode == 0, p.stderr[-4000:]
    assert "WARNING" not in p.stderr, p.stderr[-4000:]
    for page in ("cli", "tables", "views", "catalogs", "settings", "exit-codes", "reason-codes"):
        assert (site / "reference" / page / "index.html").stat().st_size > 2000, page
    performance = (site / "explanation" / "performance" / "index.html").read_text()
    assert "benchmark records, generated" not in performance
    for record in (PROJECT_ROOT / "docs" / "measurements").glob("bench-*.json"):
        for row in json.loads(record.read_text())["rows"]:
            assert f"<td>{row['case']}</td>" in performance, row["case"]


def test_the_readme_is_short_and_links_only_to_files_that_exist():
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    import re

    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if "://" not in target:
            assert (PROJECT_ROOT / target).exists(), target

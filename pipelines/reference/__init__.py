"""The docs site's reference pages, generated from the sources when the site is built (docs/gen_reference.py
writes each one): nothing here is typed twice, so a page cannot drift from the code it describes. Every
module builds its page when asked, never on import."""

from __future__ import annotations


def pages() -> dict[str, str]:
    """Page path under docs/ -> its markdown."""
    from pipelines.reference import catalogs, cli, codes, settings, tables, views

    return {
        "reference/cli.md": cli.markdown(),
        "reference/tables.md": tables.markdown(),
        "reference/views.md": views.markdown(),
        "reference/catalogs.md": catalogs.markdown(),
        "reference/settings.md": settings.markdown(),
        "reference/exit-codes.md": codes.exit_codes(),
        "reference/reason-codes.md": codes.reasons_page(),
    }

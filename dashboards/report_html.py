"""The report page's HTML besides the charts and the cards: its table of contents, the small tables and the
waste section's totals and top runs."""

from __future__ import annotations

import html

import polars as pl

# The paper's observation the parameter-server figures stand beside (Acun et al., HPCA 2021, §III).
PAPER_PS = (
    "The paper finds parameter servers use their machines less than trainers (a lower mean, a wider spread "
    "and a longer tail, Fig. 5) and their counts vary widely for the same model (Fig. 9)."
)
TOP_WASTE_RUNS = 15


def table(frame: pl.DataFrame, columns: dict[str, str]) -> str:
    head = "".join(f"<th>{html.escape(title)}</th>" for title in columns.values())
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(f'{v:,.3g}' if isinstance(v, float) else str(v))}</td>" for v in rec)
        + "</tr>"
        for rec in frame.select(list(columns)).iter_rows()
    )  # small aggregated tables
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def waste_summary(efficiency: pl.DataFrame, outliers: pl.DataFrame) -> str:
    """Fleet totals over the report's days, what each was sized from, and the parameter servers called
    oversized per source beside the paper's observation."""
    from pipelines.lib.analysis.waste import fleet_view, ps_oversized_share

    if efficiency.is_empty():
        return ""
    t = fleet_view(efficiency, outliers, top=0)["totals"]
    share = t["servers_recoverable"] / t["servers_judged"] if t["servers_judged"] else 0.0
    targets = ", ".join(f"{x:g}" for x in efficiency["target_p95_util"].unique().sort().to_list())
    basis = {
        "workload_model": "the workload model",
        "utilisation_headroom": "the utilisation headroom (telemetry only)",
        "no_telemetry": "nothing: no utilisation samples, not judged",
    }
    sized = "; ".join(f"{v:,} from {basis[k]}" for k, v in t["basis"].items())
    ps = []
    for r in ps_oversized_share(efficiency).iter_rows(named=True):
        called = (
            f"{r['share_oversized']:.0%} of {r['ps_judged']:,} judged called oversized"
            if r["ps_judged"]
            else "none judged"
        )
        unjudged = f"; {r['ps_not_judged']:,} without utilisation samples" if r["ps_not_judged"] else ""
        ps.append(f"{r['source']}: {r['ps_held']:,} held, {called}{unjudged}")
    items = [
        f"{t['n_servers']:,} servers held over {t['days']} days; right-sized to p95 &le; "
        f"{html.escape(targets)} the judged {t['servers_judged']:,} need {t['right_sized_servers']:,}: "
        f"<b>{t['servers_recoverable']:,} servers ({share:.0%}) and "
        f"{t['provisioned_kw_recoverable'] or 0:,.1f} kW of provisioned power to win back</b>.",
        f"Servers sized from {html.escape(sized)}.",
        f"Stragglers: {t['stragglers']:,} trainers in {t['runs_with_stragglers']:,} runs; hot shards: "
        f"{t['hot_shards']:,} sparse parameter servers in {t['runs_with_hot_shards']:,} runs.",
        f"Sparse parameter servers ({html.escape('; '.join(ps) or 'none')}). {html.escape(PAPER_PS)}",
    ]
    return '<ul class="waste">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def waste_runs(efficiency: pl.DataFrame, outliers: pl.DataFrame) -> str:
    """The runs holding the most recoverable servers, with the evidence (a small table)."""
    from pipelines.lib.analysis.waste import fleet_view

    top = fleet_view(efficiency, outliers, top=TOP_WASTE_RUNS)["top_runs"]
    if top.is_empty():
        return ""
    top = top.with_columns(pl.col("provisioned_kw_recoverable").round(1), pl.col("outliers").fill_null("-"))
    columns = {
        "run_id": "run",
        "day": "day",
        "model_name": "model",
        "platform": "platform",
        "servers_recoverable": "servers recoverable",
        "provisioned_kw_recoverable": "kW",
        "right_sizing": "right-sizing: held -> right-sized (binding resource p95 now -> after, basis)",
        "outliers": "stragglers and hot shards (how far off, how long)",
    }
    return (
        f'<p class="note">Top {top.height} runs by servers recoverable.</p>'
        f'<div class="waste">{table(top, columns)}</div>'
    )


def anchor(key: str) -> str:
    """The id of a section's heading, which the table of contents links to."""
    return "section-" + key.replace(" ", "-").replace("_", "-")


def heading(key: str, title: str) -> str:
    """A section's heading; jumped to from the contents, it stays clear of the sticky date-range bar."""
    return f'<h2 id="{anchor(key)}" style="scroll-margin-top: 3em">{html.escape(title)}</h2>'


def contents(sections: tuple[tuple[str, str], ...]) -> str:
    """A one-line table of contents: a link to every section's heading, by the title's short form."""
    links = " · ".join(
        f'<a href="#{anchor(key)}">{html.escape(title.split(" (")[0])}</a>' for key, title in sections
    )
    return f'<nav id="contents" aria-label="Contents" style="font-size: 13px"><b>Contents</b>: {links}</nav>'

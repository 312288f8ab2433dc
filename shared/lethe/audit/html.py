"""The table report as one self-contained HTML page (``lethe report --html``).

Charts are drawn by plotly; its JavaScript bundle is inlined once in the page, so the file
opens offline, with nothing fetched at view time. plotly is the ``report`` extra
(``pip install 'lethe[report]'``): the Lambda layer does not carry it.
"""

from __future__ import annotations

import html
from typing import Any

from lethe import errors
from lethe.audit.report import TableReport

__all__ = ["CHART_IDS", "render"]

CHART_IDS = ("files", "versions", "pending", "gc", "attempts")
_LIVE, _DELETED, _CANDIDATE, _ALERT = "#4c78a8", "#f58518", "#e45756", "#b279a2"


def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError as e:  # pragma: no cover - the dev environment has it
        raise errors.InvalidRequest(
            "the HTML report needs plotly: pip install 'lethe[report]'"
        ) from e
    return go


def _layout(title: str, **kw: Any) -> dict[str, Any]:
    return {"title": {"text": title}, "height": 360, "margin": {"t": 50, "b": 60}, **kw}


def _files(go: Any, r: TableReport) -> Any:
    names = [f.path.rsplit("/", 1)[-1][:18] for f in r.files]
    colors = [_CANDIDATE if f.compaction_candidate else _DELETED for f in r.files]
    fig = go.Figure()
    fig.add_bar(name="live rows", x=names, y=[f.live_rows for f in r.files], marker_color=_LIVE)
    fig.add_bar(
        name=f"deleted rows (red: compaction candidate, >= {r.min_deleted_fraction:.0%})",
        x=names,
        y=[f.deleted_rows for f in r.files],
        marker_color=colors,
    )
    fig.update_layout(**_layout("Live vs deleted rows per file", barmode="stack"))
    return fig


def _versions(go: Any, r: TableReport) -> Any:
    v = [x.version for x in r.versions]
    fig = go.Figure()
    fig.add_scatter(
        name="live rows", x=v, y=[x.live_rows for x in r.versions], mode="lines+markers"
    )
    fig.add_scatter(
        name="data bytes",
        x=v,
        y=[x.bytes for x in r.versions],
        mode="lines+markers",
        yaxis="y2",
    )
    fig.update_layout(
        **_layout(
            "Table size and row count over versions",
            xaxis={"title": {"text": "version"}, "dtick": max(1, len(v) // 12)},
            yaxis={"title": {"text": "live rows"}},
            yaxis2={"title": {"text": "bytes"}, "overlaying": "y", "side": "right"},
        )
    )
    return fig


def _pending(go: Any, r: TableReport) -> Any:
    fig = go.Figure()
    ids = [p.id_hash[:12] for p in r.pending]
    ages = [p.age_days for p in r.pending]
    colors = [_ALERT if a > r.deadline_days else _LIVE for a in ages]
    fig.add_bar(
        name="age (days)", x=ids, y=ages, marker_color=colors, text=[p.state for p in r.pending]
    )
    fig.add_hline(y=r.deadline_days, line_dash="dash", line_color=_CANDIDATE)
    title = f"Pending erasures by age (deadline {r.deadline_days:g} days)"
    if not r.pending:
        title += ": none pending"
    fig.update_layout(
        **_layout(title, yaxis={"title": {"text": "days"}, "range": [0, r.deadline_days * 1.2]})
    )
    return fig


def _gc(go: Any, r: TableReport) -> Any:
    fig = go.Figure()
    runs = [f"{g.run_id[:15]}{' (dry)' if g.dry_run else ''}" for g in r.gc_runs]
    cats = sorted({c for g in r.gc_runs for c in g.objects})
    for c in cats:
        fig.add_bar(name=c, x=runs, y=[g.objects.get(c, 0) for g in r.gc_runs])
    title = "GC runs: objects deleted per category" + ("" if r.gc_runs else " (no runs yet)")
    fig.update_layout(**_layout(title, barmode="stack", yaxis={"title": {"text": "objects"}}))
    return fig


def _attempts(go: Any, r: TableReport) -> Any:
    known = [x for x in r.versions if x.attempts is not None]
    fig = go.Figure()
    fig.add_bar(
        name="attempts",
        x=[f"v{x.version}" for x in known],
        y=[x.attempts for x in known],
        marker_color=[_ALERT if (x.attempts or 0) > 1 else _LIVE for x in known],
        text=[x.operation for x in known],
    )
    title = "Commit attempts per commit" + ("" if known else " (not recorded by these versions)")
    fig.update_layout(
        **_layout(
            title, xaxis={"title": {"text": "version"}}, yaxis={"title": {"text": "attempts"}}
        )
    )
    return fig


def _t(at: Any) -> str:
    return html.escape(at.isoformat(timespec="seconds")) if at is not None else ""


def _erasure_table(r: TableReport) -> str:
    head = "<tr><th>request (hash)</th><th>state</th><th>received</th><th>hidden</th>"
    head += "<th>removed</th><th>complete</th><th>GC run</th></tr>"
    rows = [
        f"<tr><td><code>{html.escape(e.id_hash)}</code></td><td>{html.escape(e.state)}</td>"
        f"<td>{_t(e.received_at)}</td><td>{_t(e.hidden_at)}</td><td>{_t(e.removed_at)}</td>"
        f"<td>{_t(e.completed_at)}</td><td>{html.escape(e.completed_run or '')}</td></tr>"
        for e in r.erasures
    ]
    return f"<table>{head}{''.join(rows) or '<tr><td colspan=7>no erasures</td></tr>'}</table>"


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
    "font-size:13px;text-align:left}.chart{margin:1em 0;border:1px solid #eee}"
    ".grid{display:grid;grid-template-columns:1fr 1fr;gap:1em}"
)


def render(r: TableReport) -> str:
    """The report page: plotly's bundle inlined, five charts, the erasure table."""
    go = _plotly()
    from plotly.offline import get_plotlyjs

    figs = [_files, _versions, _pending, _gc, _attempts]
    divs = [
        f'<div class="chart">{fn(go, r).to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{cid}", config={"displaylogo": False})}</div>'
        for cid, fn in zip(CHART_IDS, figs, strict=True)
    ]
    overdue = len(r.overdue)
    summary = (
        f"head v{r.head_version} &middot; {len(r.files)} files &middot; "
        f"{len(r.erasures)} erasures, {len(r.pending)} pending, "
        f"<b>{overdue} past the {r.deadline_days:g}-day deadline</b> &middot; "
        f"{len(r.gc_runs)} GC runs &middot; generated {_t(r.generated_at)}"
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>Lethe report: {html.escape(r.table)}</title><style>{_CSS}</style>"
        f"<script>{get_plotlyjs()}</script></head><body>"
        f"<h1>Lethe table report</h1><p><code>{html.escape(r.table)}</code></p><p>{summary}</p>"
        f'<div class="grid">{"".join(divs)}</div>'
        f"<h2>Erasure requests</h2>{_erasure_table(r)}</body></html>"
    )

"""The table report and ``lethe erasures`` (issue 16): JSON, and the HTML page rendered in
headless Chromium (charts drawn, no console error, a screenshot kept)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import EVENTS, events

import lethe
from lethe.audit.html import CHART_IDS, render
from lethe.audit.report import table_report
from lethe.cli import main
from lethe.gc import collect

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# Collects console.error/console.warn and uncaught errors into the DOM, for --dump-dom.
PROBE = (
    "<script>window.__errs=[];const __e=console.error,__w=console.warn;"
    "console.error=(...a)=>{__errs.push('error: '+a.join(' '));__e(...a)};"
    "console.warn=(...a)=>{__errs.push('warn: '+a.join(' '));__w(...a)};"
    "window.addEventListener('error',e=>__errs.push('uncaught: '+e.message));"
    "window.addEventListener('load',()=>setTimeout(()=>{const m=document.createElement('pre');"
    "m.id='console-errors';m.textContent=JSON.stringify(__errs);document.body.appendChild(m)},500));"
    "</script>"
)


def story(uri: str) -> lethe.Table:
    t = lethe.Table.create(uri, EVENTS, key="id", gc_grace="60s", row_group_bytes=1 << 10)
    t.append(events(0, 300))
    t.append(events(300, 300))
    t.delete([("customer_id", "in", list(range(20, 60)))], request_id="logical-1")
    t.erase([("id", "=", 42)], request_id="secret-erase-ticket")
    collect(uri, retention="30d", grace="7d", erasure_grace="0s", dry_run=True)
    collect(uri, retention="1v", grace="7d", erasure_grace="0s")
    t.erase([("customer_id", "=", 11)], request_id="second-erase", max_bytes=1)
    return t


def chromium(html: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile = tempfile.mkdtemp(dir=out)
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, html.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_report_json_and_erasures_cli(table_uri: str, capsys: Any) -> None:
    story(table_uri)
    assert main(["report", table_uri, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["head_version"] >= 5 and doc["files"] and doc["versions"]
    assert len(doc["gc_runs"]) == 1 and doc["gc_runs"][0]["objects"]["data"] >= 1
    states = {e["state"] for e in doc["erasures"]}
    assert states == {"complete", "erasing"}
    assert [p["state"] for p in doc["pending"]] == ["erasing"]
    assert any(f["compaction_candidate"] for f in doc["files"])
    assert all(v["attempts"] == 1 for v in doc["versions"] if v["version"] > 0)

    assert main(["erasures", table_uri, "--pending", "--json"]) == 0
    (pending,) = json.loads(capsys.readouterr().out)
    assert pending["state"] == "erasing"
    assert main(["erasures", table_uri, "--pending", "--older-than", "25d"]) == 0
    assert "no matching requests" in capsys.readouterr().out
    assert main(["erasures", table_uri, "--pending", "--older-than", "0s"]) == 1
    capsys.readouterr()
    assert (
        main(["erasures", table_uri, "--request-id", "secret-erase-ticket", "--audit", "42"]) == 0
    )
    text = capsys.readouterr().out
    assert ": complete" in text and "none found" in text
    assert main(["erasures", table_uri]) == 0
    everything = capsys.readouterr().out
    for secret in ("secret-erase-ticket", "second-erase", "logical-1"):
        assert secret not in everything and secret not in json.dumps(doc)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
def test_html_report_renders_in_chromium(table_uri: str, tmp_path: Path) -> None:
    story(table_uri)
    page = tmp_path / "report.html"
    assert main(["report", table_uri, "--html", str(page)]) == 0
    text = page.read_text()
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)  # nothing fetched
    assert "secret-erase-ticket" not in text
    probed = tmp_path / "probed.html"
    probed.write_text(text.replace("<head>", "<head>" + PROBE, 1))

    run = chromium(
        probed,
        tmp_path,
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=15000",
        "--dump-dom",
    )
    dom = run.stdout
    for cid in CHART_IDS:
        chart = dom[dom.index(f'id="chart-{cid}"') :]
        chart = chart[: chart.index("</svg>")]
        assert 'class="main-svg"' in chart, cid
        assert re.search(r"<(path|rect|text)\b", chart), cid
    assert dom.count('class="point"') >= 4  # bars drawn
    errs = re.search(r'<pre id="console-errors">(.*?)</pre>', dom)
    assert errs is not None and json.loads(errs.group(1).replace("&quot;", '"')) == []
    assert not [
        line for line in run.stderr.splitlines() if "CONSOLE" in line and "Uncaught" in line
    ]

    shot = tmp_path / "report.png"
    chromium(
        page,
        tmp_path,
        f"--screenshot={shot}",
        "--window-size=1400,1300",
        "--virtual-time-budget=15000",
        "--hide-scrollbars",
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_render_without_gc_runs_or_pending(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 10))
    page = render(table_report(t.catalog))
    assert page.count('class="chart"') == len(CHART_IDS)
    assert "none pending" in page and "no runs yet" in page

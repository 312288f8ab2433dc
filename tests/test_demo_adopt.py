"""The demo's adoption step on its own (``make demo`` runs it in its story, tests/test_e2e.py
end to end): adopted in place, one person erased, GC deletes the superseded originals, the
whole-bucket audit finds the person nowhere and nothing printed names a value."""

from __future__ import annotations

import time
from typing import Any

from devtools.demo_adopt import REQUEST_ID, adopt_story


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def step(self, title: str) -> None:
        self.lines.append(title)

    def say(self, msg: str) -> None:
        self.lines.append(msg)


def test_the_adoption_step_erases_the_person_from_raw_and_prints_no_value(s3: Any) -> None:
    story = _Lines()
    t0 = time.perf_counter()
    r = adopt_story(story, s3, rows=2_000, customers=50)
    secs = time.perf_counter() - t0
    assert r["adopt_plan_files"] == r["adopt_files"] == 3 and r["adopt_copied"] == 0
    assert r["adopt_plan_actions"] == {"row-group splice": 3}  # pyarrow: no page index
    assert r["adopt_rows_erased"] == r["adopt_person_rows"] > 0 and r["adopt_files_spliced"] >= 1
    assert r["adopt_found_before"] and r["adopt_found_after"] == ()
    assert len(r["adopt_raw_left"]) == 3 - r["adopt_files_spliced"]
    assert r["adopt_receipt_state"] == "complete"
    text = "\n".join(story.lines)
    assert REQUEST_ID not in text and "audit of the whole bucket" in text
    assert "row-group splice" in text  # the readiness report is shown
    assert secs < 10, secs  # the demo step stays short (~5 s budget on a busy machine)

"""The demo's adoption step on its own (``make demo`` runs it in its story, tests/test_e2e.py
end to end): adopted in place, one person erased, GC deletes the superseded originals, the
whole-bucket audit finds the person nowhere and nothing printed names a value."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from devtools.demo_adopt import REQUEST_ID, adopt_story
from lethe.errors import InvalidRequest


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def step(self, title: str) -> None:
        self.lines.append(title)

    def say(self, msg: str) -> None:
        self.lines.append(msg)


def test_the_adoption_step_erases_the_person_from_raw_and_prints_no_value(s3: Any) -> None:
    story = _Lines()
    # a bucket of its own: tests/test_e2e.py runs the demo's story on the same moto server
    r = adopt_story(
        story, s3, rows=2_000, customers=50, bucket=f"demo-adopt-{uuid.uuid4().hex[:8]}"
    )
    assert r["adopt_plan_files"] == r["adopt_files"] == 3 and r["adopt_copied"] == 0
    assert r["adopt_plan_actions"] == {"row-group splice": 3}  # pyarrow: no page index
    assert r["adopt_rows_erased"] == r["adopt_person_rows"] > 0 and r["adopt_files_spliced"] >= 1
    assert r["adopt_found_before"] and r["adopt_found_after"] == ()
    assert len(r["adopt_raw_left"]) == 3 - r["adopt_files_spliced"]
    assert r["adopt_receipt_state"] == "complete"
    text = "\n".join(story.lines)
    assert REQUEST_ID not in text and "audit of the whole bucket" in text
    assert "row-group splice" in text  # the readiness report is shown


def test_a_second_run_on_the_same_bucket_is_refused_not_counted_twice(s3: Any) -> None:
    """Run twice on one bucket, the story would adopt its re-uploaded originals beside the
    files spliced from them (6 files, not 3): it refuses a bucket that holds anything."""
    name = f"demo-adopt-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="raw/events/dt=2026-01-01/part-0.parquet", Body=b"x")
    with pytest.raises(InvalidRequest, match="needs an empty bucket"):
        adopt_story(_Lines(), s3, rows=10, customers=2, bucket=name)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=name)["Contents"]] == [
        "raw/events/dt=2026-01-01/part-0.parquet"
    ]  # nothing written

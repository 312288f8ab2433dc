"""lethe.lake.requests.parse_message validates with pydantic alone, exactly as Powertools' parser
did when the library depended on it (Powertools is now only the functions' extra)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.utilities.parser import parse
from pydantic import ValidationError

from lethe import errors
from lethe.lake.requests import DeleteRequestMessage, parse_message

GOOD = {
    "request_id": "r-1",
    "table": "s3://b/t",
    "filters": [["id", "=", 1]],
    "mode": "erase",
    "requested_at": "2026-11-22T10:00:00Z",
}
BODIES: list[Any] = [
    json.dumps(GOOD),
    json.dumps(GOOD).encode(),
    GOOD,
    {**GOOD, "mode": "logical"},
    json.dumps({**GOOD, "filters": [[["id", "=", 1]], [["id", "in", [2, 3]]]]}),
    '{"request_id": "x", "table": ',
    "",
    "null",
    "[]",
    "7",
    json.dumps({**GOOD, "surprise": "someone's key"}),
    json.dumps({k: v for k, v in GOOD.items() if k != "requested_at"}),  # dated by the queue
    json.dumps({k: v for k, v in GOOD.items() if k != "filters"}),
    json.dumps({**GOOD, "table": "http://b/t"}),
    json.dumps({**GOOD, "filters": []}),
    json.dumps({**GOOD, "filters": [["id", "="]]}),
    json.dumps({**GOOD, "mode": "shred"}),
    json.dumps({**GOOD, "request_id": ""}),
    json.dumps({**GOOD, "requested_at": "yesterday"}),
    {**GOOD, "filters": "id = 1"},
    [GOOD],
]


def _powertools(body: Any) -> Any:
    event = body.decode() if isinstance(body, bytes) else body
    try:
        return parse(event=event, model=DeleteRequestMessage)
    except ValidationError as e:
        return [(x["type"], x["loc"], x["msg"]) for x in e.errors()]


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_parse_message_matches_powertools_parser(body: Any) -> None:
    expected = _powertools(body)
    if isinstance(expected, DeleteRequestMessage):
        assert parse_message(body) == expected
        return
    with pytest.raises(errors.InvalidRequest) as e:
        parse_message(body)
    kind, _, msg = expected[0]
    assert msg in str(e.value)
    if kind == "json_invalid":
        assert str(e.value).startswith("message body is not valid JSON")
    assert "someone's key" not in str(e.value)

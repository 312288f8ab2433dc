"""Faults injected from outside the library, on a real boto3 client: botocore's event hooks
fail or interleave chosen S3 requests, so production code carries no parameter for tests.

A request failed here raises inside the client call, as a dropped connection would; the
library's store translates it (:func:`lethe.storage.store.translate_error`) like any other failure.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

__all__ = ["Crash", "InjectedFault", "crash_in", "fail_requests_after", "on_request"]

WRITES = ("PutObject", "UploadPart", "UploadPartCopy")


class InjectedFault(RuntimeError):
    """The failure a test asked for."""


@contextmanager
def on_request(
    client: Any, ops: Sequence[str], hook: Callable[[str, dict[str, Any]], None]
) -> Iterator[None]:
    """Call ``hook(op, params)`` before each request ``op`` of ``ops`` that ``client`` sends
    (an exception it raises fails that request)."""
    uid = uuid.uuid4().hex

    def before(model: Any, params: dict[str, Any], **_: Any) -> None:
        hook(model.name, params)

    events = client.meta.events
    for op in ops:
        events.register(f"before-call.s3.{op}", before, unique_id=f"{uid}-{op}")
    try:
        yield
    finally:
        for op in ops:
            events.unregister(f"before-call.s3.{op}", unique_id=f"{uid}-{op}")


@contextmanager
def fail_requests_after(client: Any, n: int, ops: Sequence[str] = WRITES) -> Iterator[list[str]]:
    """Let ``n`` requests of ``ops`` through ``client``, then fail every later one with
    :class:`InjectedFault`; yields the operations let through, in order."""
    passed: list[str] = []

    def hook(op: str, params: dict[str, Any]) -> None:
        if len(passed) >= n:
            raise InjectedFault(f"injected failure of {op} after {n} requests")
        passed.append(op)

    with on_request(client, ops, hook):
        yield passed


class Crash(BaseException):
    """A process dying inside a call: no ``except Exception`` of the library catches it."""


@contextmanager
def crash_in(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> Iterator[None]:
    """Inside the block, ``owner.name`` raises :class:`Crash`, and the block must end by it
    (as :func:`pytest.raises`); after the block, ``owner.name`` is itself again."""

    def crash(*a: Any, **kw: Any) -> Any:
        raise Crash

    with monkeypatch.context() as m:
        m.setattr(owner, name, crash)
        with pytest.raises(Crash):
            yield

"""The log lines a Powertools handler writes during one test."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType

import pytest


def handler_logs(capsys: pytest.CaptureFixture[str], handler: ModuleType) -> Callable[[], str]:
    """A reader of ``handler``'s log lines of this test (its Powertools logger writes to this
    stdout): each call returns what was written since the last."""

    class Stdout:  # whatever sys.stdout is when a line is written (capsys swaps it per phase)
        def write(self, s: str) -> int:
            return sys.stdout.write(s)

        def flush(self) -> None:
            sys.stdout.flush()

    # not setStream: it flushes the previous test's (closed) capture first
    handler.logger.registered_handler.stream = Stdout()

    def read() -> str:
        got = capsys.readouterr()
        return got.out + got.err

    return read


# Fixtures of the delete-request handler's tests (test_delete_requests, test_lake_requests):
# a test module imports them by name.


@pytest.fixture(autouse=True)
def delete_handler_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "lethe-delete-requests")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Lethe")


@pytest.fixture
def logs(capsys: pytest.CaptureFixture[str]) -> Callable[[], str]:
    """The delete-request handler's log lines of this test."""
    from functions.delete_requests import handler as h

    return handler_logs(capsys, h)

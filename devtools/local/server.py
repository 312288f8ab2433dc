"""Start moto's server on 127.0.0.1 (in a thread, or in a separate process for benchmarks).

The real S3/SQS protocol over HTTP via boto3: nothing in Lethe is patched. Credentials and
``AWS_ENDPOINT_URL`` are set in ``os.environ`` so that every boto3 client (and Spark
executors, which inherit the environment) talks to it.

One fidelity fix, at the HTTP boundary: S3 evaluates ``If-None-Match``/``If-Match`` and
writes as one atomic step; moto checks, then writes, so two concurrent create-only PUTs of
one key can both succeed (seen under load: two committers both "won" manifest vN). Requests
carrying a write condition are therefore served one at a time (:class:`AtomicConditions`);
everything else stays concurrent.

One protocol fix, in moto's EMR Serverless backend (:func:`fix_moto_quirks`): moto 5.2 answers
``ListJobRuns`` of an application that has no run yet with ``ResourceNotFoundException``
(AWS answers an empty list). The library's duplicate check calls ``ListJobRuns`` before the
first run, so the fix belongs here, never in ``lethe``.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AtomicConditions", "LocalAws", "fix_moto_quirks", "start_moto"]

DEFAULT_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


@dataclass
class LocalAws:
    endpoint: str
    port: int
    _thread_server: Any = None
    _proc: subprocess.Popen[bytes] | None = None
    _saved_env: dict[str, str | None] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(service, endpoint_url=self.endpoint, region_name="us-east-1")  # type: ignore[call-overload]

    def stop(self) -> None:
        if self._thread_server is not None:
            self._thread_server.stop()
            self._thread_server = None
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self._saved_env.clear()

    def __enter__(self) -> LocalAws:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class AtomicConditions:
    """WSGI middleware: conditional writes (PUT/POST with ``If-None-Match``/``If-Match``) run
    one at a time, their whole response produced under the lock, as S3 makes them atomic."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        conditional = environ.get("REQUEST_METHOD") in ("PUT", "POST") and (
            "HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ
        )
        if not conditional:
            return self.app(environ, start_response)
        with self.lock:
            return list(self.app(environ, start_response))


def fix_moto_quirks() -> None:
    """Make moto's ``ListJobRuns`` answer an existing application without runs with an empty
    list, as AWS does. Idempotent; raises ``RuntimeError`` if moto's internals moved (a moto
    upgrade must fail loudly, not misbehave)."""
    try:
        from moto.emrserverless.models import EMRServerlessBackend
    except ImportError as e:
        raise RuntimeError(f"moto's EMR Serverless backend moved: {e}") from e
    original = EMRServerlessBackend.list_job_runs
    if getattr(original, "_lethe_fixed", False):
        return

    def list_job_runs(self: Any, application_id: str, *args: Any, **kwargs: Any) -> Any:
        if application_id in self.applications:
            self.job_runs.setdefault(application_id, [])
        return original(self, application_id, *args, **kwargs)

    list_job_runs._lethe_fixed = True  # type: ignore[attr-defined]
    EMRServerlessBackend.list_job_runs = list_job_runs  # type: ignore[method-assign]


def _server(port: int) -> Any:
    """moto's app behind :class:`AtomicConditions`, as a threaded werkzeug server."""
    fix_moto_quirks()
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    app = AtomicConditions(DomainDispatcherApplication(create_backend_app))
    return make_server("127.0.0.1", port, app, True, request_handler=MotoRequestHandler)


class _ThreadServer:
    def __init__(self, port: int) -> None:
        self.server = _server(port)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto(*, process: bool = False, port: int = 0, set_env: bool = True) -> LocalAws:
    """Start moto's server on 127.0.0.1; ``process=True`` runs it in its own process so the
    client's CPU time is the library's own (benchmarks)."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    if process:
        port = port or _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "devtools.local.server", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)
        local = LocalAws(endpoint, port, _proc=proc)
    else:
        srv = _ThreadServer(port)
        host, real_port = srv.server.server_address[:2]
        local = LocalAws(f"http://{host}:{real_port}", int(real_port), _thread_server=srv)
    if set_env:
        env = {**DEFAULT_ENV, "AWS_ENDPOINT_URL": local.endpoint, "MOTO_PORT": str(local.port)}
        for k, v in env.items():
            local._saved_env.setdefault(k, os.environ.get(k))
            os.environ[k] = v
    return local


if __name__ == "__main__":  # the server process of start_moto(process=True)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    _server(int(sys.argv[1])).serve_forever()

"""Start moto's server on 127.0.0.1 (in a thread, or in a separate process for benchmarks).

The real S3/SQS protocol over HTTP via boto3: nothing in Lethe is patched. Credentials and
``AWS_ENDPOINT_URL`` are set in ``os.environ`` so that every boto3 client (and Spark
executors, which inherit the environment) talks to it.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LocalAws", "start_moto"]

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
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
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
        from moto.server import ThreadedMotoServer

        srv = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        srv.start()
        host, real_port = srv.get_host_and_port()
        local = LocalAws(f"http://{host}:{real_port}", int(real_port), _thread_server=srv)
    if set_env:
        env = {**DEFAULT_ENV, "AWS_ENDPOINT_URL": local.endpoint, "MOTO_PORT": str(local.port)}
        for k, v in env.items():
            local._saved_env.setdefault(k, os.environ.get(k))
            os.environ[k] = v
    return local

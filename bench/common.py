"""Shared benchmark plumbing: moto's server in its own process, s3rver beside it for wall
times, timing, CPU accounting."""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools.local.server import LocalAws, start_moto

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def moto_process() -> Iterator[LocalAws]:
    """moto in a separate process, so this process's CPU time is the library's own."""
    aws = start_moto(process=True)
    try:
        yield aws
    finally:
        aws.stop()


def new_bucket(aws: LocalAws) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    aws.client("s3").create_bucket(Bucket=name)
    return name


@dataclass(frozen=True, slots=True)
class Measured:
    result: Any
    wall: float
    cpu: float


@dataclass(frozen=True, slots=True)
class Moved:
    """What an operation moved over the files it touched: bytes down and up."""

    files: int = 0
    down: int = 0
    up: int = 0

    @property
    def moved(self) -> int:
        return self.down + self.up


def measure(fn: Callable[[], Any]) -> Measured:
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return Measured(out, wall, cpu)


def mib(n: float) -> str:
    return f"{n / (1 << 20):,.2f} MiB"


# --- s3rver: a second S3 server, for wall times --------------------------------------------
# moto 5.2 reads the whole object for every ranged GET (0.1 s for a 200 MiB file), so on moto
# a read made of several small GETs always loses on wall time to one large GET, whatever the
# bytes. s3rver (Node.js, npm) streams a ranged GET from disk, as S3 serves it, in time
# proportional to the range. The read benches copy their table there and time the same reads
# on it; requests, bytes and client CPU are judged on moto (DESIGN §8), wall times on s3rver.
S3RVER_PACKAGE = Path(__file__).resolve().parent / "s3rver"
S3RVER_HOME = ROOT / ".bench" / "s3rver"


class Unavailable(RuntimeError):
    """A part of a bench cannot run on this machine (the reason says why)."""


def _s3rver_bin() -> Path:
    """The s3rver executable, installed with ``npm ci`` from ``bench/s3rver``'s lock file."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise Unavailable("node and npm are needed for s3rver (Node.js 18+)")
    exe = S3RVER_HOME / "node_modules" / ".bin" / "s3rver"
    lock = (S3RVER_PACKAGE / "package-lock.json").read_bytes()
    stamp = S3RVER_HOME / "package-lock.json"
    if exe.exists() and stamp.exists() and stamp.read_bytes() == lock:
        return exe
    S3RVER_HOME.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(S3RVER_PACKAGE / name, S3RVER_HOME / name)
    try:
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=S3RVER_HOME,
            check=True,
            capture_output=True,
            timeout=float(os.environ.get("LETHE_BENCH_NPM_TIMEOUT", "600")),
        )
    except (subprocess.SubprocessError, OSError) as e:
        stamp.unlink(missing_ok=True)
        raise Unavailable(f"npm ci of s3rver failed: {e}") from e
    return exe


@contextmanager
def s3rver_process() -> Iterator[Any]:
    """s3rver on 127.0.0.1 in its own process, objects in a temporary folder; yields a boto3
    S3 client for it. Raises :class:`Unavailable` when it cannot be installed or started."""
    import boto3
    from botocore.config import Config

    exe = _s3rver_bin()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    data = tempfile.mkdtemp(prefix="lethe-s3rver-")
    proc = subprocess.Popen(
        [str(exe), "--silent", "-a", "127.0.0.1", "-p", str(port), "-d", data],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise Unavailable("s3rver did not start") from None
                time.sleep(0.1)
        yield boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{port}",
            region_name="us-east-1",
            aws_access_key_id="S3RVER",  # s3rver's own fixed credentials
            aws_secret_access_key="S3RVER",
            config=Config(s3={"addressing_style": "path"}),
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(data, ignore_errors=True)


def copy_prefix(src: Any, dst: Any, bucket: str, prefix: str) -> int:
    """Copy every object under ``prefix`` of ``bucket`` from client ``src`` to client ``dst``
    (creating the bucket there); the number of bytes copied."""
    dst.create_bucket(Bucket=bucket)
    n = 0
    for page in src.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            body = src.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            dst.put_object(Bucket=bucket, Key=o["Key"], Body=body)
            n += len(body)
    return n


@contextmanager
def s3rver_copy(aws: LocalAws, bucket: str, prefix: str) -> Iterator[Any]:
    """s3rver (:func:`s3rver_process`) holding a copy of what is under ``prefix`` of
    ``bucket`` on moto; yields its client. Raises :class:`Unavailable` as that does."""
    with s3rver_process() as rv:
        copy_prefix(aws.client("s3"), rv, bucket, prefix)
        yield rv


def body_size(body: Any) -> int:
    """Bytes in a body boto3 sends or receives (bytes, str, a view, a seekable file)."""
    if body is None:
        return 0
    if isinstance(body, str):
        return len(body.encode())
    if isinstance(body, (bytes, bytearray)):
        return len(body)
    if isinstance(body, memoryview):
        return body.nbytes
    try:  # a seekable file-like body
        pos = body.tell()
        end = body.seek(0, os.SEEK_END)
        body.seek(pos)
        return int(end - pos)
    except (AttributeError, OSError, ValueError):
        return 0

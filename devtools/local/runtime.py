"""The local event-driven runtime: the synthesized CDK stack, run against moto on 127.0.0.1.

``python -m devtools.local.runtime`` starts moto's server, creates what the stack's template
describes and then delivers events to the project's own handlers until Ctrl-C. As a library::

    rt = LocalRuntime.start()             # moto + resources from the template
    s3.put_object(Bucket=rt.bucket, Key="incoming/x.parquet", Body=...)
    rt.pump_until_idle()                  # S3 event -> ingest trigger -> table
    rt.run_gc(grace="0s")                 # the GC state machine on moto's interpreter
    rt.stop()

Everything is read from the template (synthesized in-process from ``infra/``, cached by a
hash of its inputs; see :func:`load_template`) by a small reader that resolves ``Ref``,
``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub``, ``Fn::Select`` and ``Fn::Split`` to local names and
ARNs. How each piece maps (``docs/local.md`` has the long form):

=============================  ==============================================================
template                       locally
=============================  ==============================================================
``AWS::S3::Bucket``            a moto bucket (versioning as declared; lifecycle, logging,
                               policies and encryption are not applied)
``AWS::SQS::Queue``            a moto queue with its redrive policy; the visibility timeout
                               of every queue the runtime consumes is shortened to
                               :attr:`LocalSettings.visibility_timeout` (1 s) so that retries
                               and the trip to the DLQ take seconds, not hours
``AWS::Lambda::Function``      the handler string (``module.function`` under ``functions/``)
                               loaded as its own module object, in its own environment (the
                               template's variables resolved to local resources), invoked
                               in-process with ``os.environ`` swapped under a lock
``AWS::Lambda::EventSource     the runtime polls the queue itself: ReceiveMessage up to the
Mapping`` (SQS)                batch size, one invocation with the real SQS event, then
                               deletes exactly the messages not in ``batchItemFailures``
``Custom::S3BucketNotifica     ObjectCreated under the filter prefix notifies a local SQS
tions`` (to Lambda)            queue; each S3 event is delivered like an asynchronous
                               invocation: retried ``MaximumRetryAttempts`` times, then sent
                               to the function's dead-letter queue
``AWS::EMRServerless::         created in moto (with a release label moto accepts); every
Application`` + job runs       job run a handler starts is run here: ``spark_jobs/<entry
                               point>.main(entryPointArguments)`` on a local Spark session,
                               its state (RUNNING, SUCCESS, FAILED) written back to moto
``AWS::StepFunctions::         moto's ASL interpreter, GC functions routed to our handlers
StateMachine``                 (:mod:`devtools.local.stepfunctions`)
``AWS::Events::Rule``          a timer (:attr:`LocalSettings.gc_interval`) and
                               :meth:`LocalRuntime.run_gc`, with the rule's input
``Custom::CDKBucket            ``spark_jobs/*.py`` uploaded to the artifacts bucket
Deployment``
IAM, KMS, logs, alarms, SNS    not created (moto would not enforce them)
=============================  ==============================================================

Handlers print their Powertools logs and metrics (EMF) to stdout; the runtime routes each
function's output to ``<log dir>/<function>.log`` and sums its metrics
(:attr:`LocalFunction.metrics`), the local stand-in for CloudWatch.

What cannot be mimicked: Lambda timeouts and memory limits (an in-process handler cannot be
interrupted; a run longer than the function's timeout is reported), concurrency (one event
at a time), batching windows (batches are whatever is visible), and the delays between
asynchronous retries (immediate here).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import importlib.metadata
import io
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, ClassVar
from urllib.parse import unquote_plus

from devtools.local.events import LambdaContext, sqs_event
from devtools.local.server import LocalAws, start_moto
from devtools.local.stepfunctions import (
    CODE_ROOT,
    ROOT,
    ExecutionResult,
    LocalRunError,
    LocalStateMachine,
    environment,
    load_handler,
)
from lethe.gc.models import GcReport
from lethe.process import run_main

__all__ = [
    "BatchOutcome",
    "GcRun",
    "Invocation",
    "JobRun",
    "LocalFunction",
    "LocalRuntime",
    "LocalSettings",
    "Physical",
    "PumpResult",
    "Sink",
    "StackTemplate",
    "load_template",
    "main",
    "synthesize_local_template",
]

STACK_NAME = "LetheStack"
ACCOUNT = "123456789012"
REGION = "us-east-1"
SPARK_JOBS = ROOT / "spark_jobs"
# moto 5.2 accepts only ``emr-N.N.0`` labels; the template's own is kept in emr_applications.
MOTO_EMR_RELEASE_LABEL = "emr-7.0.0"
TEMPLATE_INPUTS = ("infra", "cdk.json")
_NO_VALUE = object()


# --- template ---------------------------------------------------------------------------------
def _template_key(context: Mapping[str, object]) -> str:
    h = hashlib.sha256()
    for rel in TEMPLATE_INPUTS:
        p = ROOT / rel
        files = sorted(p.rglob("*.py")) if p.is_dir() else [p]
        for f in files:
            if f.is_file():
                h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    jobs = sorted(f.name for f in SPARK_JOBS.glob("*.py")) if SPARK_JOBS.is_dir() else []
    h.update(json.dumps(jobs).encode())
    h.update(json.dumps(dict(context), sort_keys=True, default=str).encode())
    for dist in ("aws-cdk-lib", "constructs"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            h.update(f"{dist}={importlib.metadata.version(dist)}".encode())
    for env in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION"):
        h.update(f"{env}={os.environ.get(env, '')}".encode())
    return h.hexdigest()[:20]


def _cache_dir() -> Path:
    if os.environ.get("LETHE_CACHE_DIR"):
        return Path(os.environ["LETHE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lethe"


def synthesize_local_template(context: Mapping[str, object] | None = None) -> dict[str, Any]:
    """Synthesize the CDK app in-process (no cdk-nag) and return the stack's template.

    The stack wants the Lambda layer zips as assets; locally the layers' content is this
    virtualenv, so empty placeholder zips stand in for them (``infra.constants``' two zip
    paths point at a temporary directory for the duration of the synthesis). No layer build,
    no network, no Docker.
    """
    import zipfile

    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    import aws_cdk.assertions as assertions

    from infra import constants
    from infra.app import build_app

    names = ("LAYER_DEPS_ZIP", "LAYER_LIB_ZIP")
    saved = [getattr(constants, n) for n in names]
    with tempfile.TemporaryDirectory(prefix="lethe-local-synth-") as tmp:
        zips = []
        for name in ("deps.zip", "lethe.zip"):
            path = Path(tmp) / name
            with zipfile.ZipFile(path, "w") as z:
                z.writestr("python/.local-placeholder", "the local runtime uses the virtualenv\n")
            zips.append(str(path))
        for n, placeholder in zip(names, zips, strict=True):
            setattr(constants, n, placeholder)
        try:
            _, stack = build_app(context=dict(context or {}), outdir=f"{tmp}/out", nag=False)
            template: dict[str, Any] = dict(assertions.Template.from_stack(stack).to_json())
        finally:
            for n, v in zip(names, saved, strict=True):
                setattr(constants, n, v)
    return template


def load_template(
    source: str | Path | Mapping[str, Any] | None = None,
    *,
    context: Mapping[str, object] | None = None,
    cache_dir: Path | None = None,
    refresh: bool = False,
    echo: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The stack's template: ``source`` itself (a dict, or a ``*.template.json`` path, e.g.
    from ``make synth``), else the cached synthesis for the current ``infra/`` sources,
    ``cdk.json``, context and CDK version (``$LETHE_CACHE_DIR`` or ``~/.cache/lethe``), else
    a fresh in-process synthesis (about 20-60 s), which is then cached.

    A cache keyed by content, not ``cdk.out/``'s mtime: a stale ``cdk.out`` would silently
    run yesterday's stack.
    """
    if isinstance(source, Mapping):
        return dict(source)
    if source is not None:
        loaded: dict[str, Any] = json.loads(Path(source).read_text())
        return loaded
    ctx = dict(context or {})
    path = (cache_dir or _cache_dir()) / f"template-{STACK_NAME}-{_template_key(ctx)}.json"
    if path.is_file() and not refresh:
        cached: dict[str, Any] = json.loads(path.read_text())
        return cached
    if echo:
        echo(f"synthesizing the CDK app (infra/) in-process; cached as {path}")
    template = synthesize_local_template(ctx)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{uuid.uuid4().hex[:6]}.tmp")
        tmp.write_text(json.dumps(template, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError as e:  # a read-only home: synthesize again next time
        if echo:
            echo(f"could not cache the template in {path.parent}: {e}")
    return template


@dataclass(frozen=True, slots=True)
class Physical:
    """What a logical id resolves to locally: its ``Ref`` value and its attributes."""

    ref: str
    attrs: Mapping[str, str] = field(default_factory=dict)


class StackTemplate:
    """A small reader of a CloudFormation template and resolver of its intrinsics.

    ``physical`` is filled as resources are created; resolving a reference to anything not
    created (or not creatable) locally raises :class:`LocalRunError` naming it.
    """

    PSEUDO: ClassVar[dict[str, str]] = {
        "AWS::Region": REGION,
        "AWS::AccountId": ACCOUNT,
        "AWS::Partition": "aws",
        "AWS::URLSuffix": "amazonaws.com",
        "AWS::StackName": STACK_NAME,
        "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{STACK_NAME}/local",
    }

    def __init__(self, template: Mapping[str, Any]) -> None:
        self.template = template
        self.resources: dict[str, dict[str, Any]] = dict(template.get("Resources", {}))
        self.physical: dict[str, Physical] = {}

    def of_type(self, *types: str) -> dict[str, dict[str, Any]]:
        """``logical id -> Properties`` of the resources of the given types, in template order."""
        return {
            lid: dict(r.get("Properties") or {})
            for lid, r in self.resources.items()
            if r.get("Type") in types
        }

    def type_of(self, lid: str) -> str:
        return str(self.resources.get(lid, {}).get("Type", "?"))

    def _get(self, lid: str) -> Physical:
        if lid in self.PSEUDO:
            return Physical(self.PSEUDO[lid])
        p = self.physical.get(lid)
        if p is None:
            what = self.type_of(lid) if lid in self.resources else "not in the template"
            raise LocalRunError(f"{lid} ({what}) has no local counterpart")
        return p

    def resolve(self, value: Any) -> Any:
        """``value`` with every intrinsic function replaced by its local value."""
        if isinstance(value, list):
            return [v for v in (self.resolve(v) for v in value) if v is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                if arg == "AWS::NoValue":
                    return _NO_VALUE
                return self._get(str(arg)).ref
            if key == "Fn::GetAtt":
                lid, attr = arg.split(".", 1) if isinstance(arg, str) else arg
                p = self._get(str(lid))
                if attr not in p.attrs:
                    raise LocalRunError(f"no local value for Fn::GetAtt {lid}.{attr}")
                return p.attrs[attr]
            if key == "Fn::Join":
                sep, parts = arg
                return str(sep).join(str(p) for p in self.resolve(parts))
            if key == "Fn::Sub":
                return self._sub(arg)
            if key == "Fn::Select":
                index, items = arg
                return self.resolve(items)[int(self.resolve(index))]
            if key == "Fn::Split":
                sep, text = arg
                return str(self.resolve(text)).split(str(sep))
            if key.startswith("Fn::") or key == "Condition":
                raise LocalRunError(f"intrinsic {key} is not supported by the local runtime")
        out = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not _NO_VALUE}

    def _sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        values = {k: str(self.resolve(v)) for k, v in dict(variables).items()}

        def repl(m: re.Match[str]) -> str:
            name = m.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in values:
                return values[name]
            if "." in name:
                lid, attr = name.split(".", 1)
                return str(self.resolve({"Fn::GetAtt": [lid, attr]}))
            return str(self.resolve({"Ref": name}))

        return re.sub(r"\$\{([^}]+)\}", repl, str(text))

    def try_resolve(self, value: Any) -> tuple[Any, str | None]:
        """``(resolved, None)`` or ``(None, why not)``."""
        try:
            return self.resolve(value), None
        except LocalRunError as e:
            return None, str(e)


# --- output routing and metrics ----------------------------------------------------------------
class Sink:
    """One destination of routed output (a function's log): a file, appended to per write,
    plus the output's EMF metrics summed by name and its warning/error log records."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._partial = ""
        self._lock = threading.Lock()
        self.metrics: dict[str, float] = {}
        self.problems: list[str] = []

    def write(self, s: str) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(s)
            self._partial += s
            *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self._line(line)

    def _line(self, line: str) -> None:
        if not line.startswith("{"):
            return
        try:
            d = json.loads(line)
        except ValueError:
            return
        if not isinstance(d, dict):
            return
        aws = d.get("_aws")
        if isinstance(aws, dict):  # CloudWatch embedded metric format
            for directive in aws.get("CloudWatchMetrics", []):
                for m in directive.get("Metrics", []):
                    v = d.get(m.get("Name"))
                    values = v if isinstance(v, list) else [v]
                    total = sum(float(x) for x in values if isinstance(x, int | float))
                    self.metrics[m["Name"]] = self.metrics.get(m["Name"], 0.0) + total
        elif d.get("level") in ("WARNING", "ERROR", "CRITICAL"):
            reason = d.get("reason") or d.get("exception_name") or ""
            self.problems.append(f"{d.get('message')}{': ' + str(reason) if reason else ''}")

    def flush(self) -> None:
        """Writes are not buffered."""


class _Router(io.TextIOBase):
    """``sys.stdout`` while a runtime runs. A write goes to the sink its thread captures
    (a function or a job run executing), else, from any thread but the main one (moto's Step
    Functions interpreter invoking the GC functions), to the background sink (the workflow
    log), else to the stdout the router replaced. Powertools' Logger binds its stream at a
    function's cold start, always under this router, so its later lines are routed too."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()
        self.fallback: Any = None
        self.background: Sink | None = None
        self._installs = 0

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def _sink(self) -> Sink | None:
        sink: Sink | None = getattr(self._local, "sink", None)
        if sink is None and threading.current_thread() is not threading.main_thread():
            return self.background
        return sink

    def write(self, s: str) -> int:
        sink = self._sink()
        if sink is not None:
            sink.write(s)
        else:
            out = self.fallback if self.fallback is not None else sys.__stdout__
            if out is not None and out is not self:
                out.write(s)
        return len(s)

    def flush(self) -> None:
        if self._sink() is None and self.fallback is not None and self.fallback is not self:
            self.fallback.flush()

    def install(self, background: Sink) -> None:
        if self._installs == 0 and sys.stdout is not self:
            self.fallback = sys.stdout
            sys.stdout = self
        self._installs += 1
        self.background = background

    def uninstall(self) -> None:
        self._installs = max(0, self._installs - 1)
        if self._installs == 0:
            if sys.stdout is self:
                sys.stdout = self.fallback
            self.background = None

    @contextlib.contextmanager
    def capture(self, sink: Sink) -> Iterator[None]:
        prev = getattr(self._local, "sink", None)
        self._local.sink = sink
        saved = sys.stdout
        sys.stdout = self
        try:
            yield
        finally:
            sys.stdout = saved
            self._local.sink = prev


_ROUTER = _Router()


class _SinkStream(io.TextIOBase):
    """A text stream writing into a :class:`Sink` (a job's ``sys.stderr``)."""

    def __init__(self, sink: Sink) -> None:
        super().__init__()
        self.sink = sink

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.sink.write(s)
        return len(s)


@contextlib.contextmanager
def _fd_redirect(path: Path) -> Iterator[None]:
    """Point file descriptors 1 and 2 at ``path`` (what a JVM started meanwhile inherits)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


# --- functions ----------------------------------------------------------------------------------
def _handler_file(handler: str, code_root: Path = CODE_ROOT) -> Path | None:
    """The file of ``module.function`` under the code root, if it exists."""
    mod = handler.rpartition(".")[0]
    f = code_root.joinpath(*mod.split(".")).with_suffix(".py") if mod else None
    return f if f is not None and f.is_file() else None


@dataclass(frozen=True, slots=True)
class Invocation:
    """One invocation: ``ok`` (no unhandled exception), its JSON result or error, duration."""

    ok: bool
    result: Any
    error: str | None
    seconds: float


class LocalFunction:
    """A template ``AWS::Lambda::Function`` run in-process.

    Attributes:
        logical_id, name, arn, handler: as in the template (name and ARN local).
        environment: the function's variables, resolved to local resources.
        timeout: the template's timeout in seconds (reported when exceeded, not enforced).
        invocations, failures: counters.
        sink: its routed output (log file, metrics, warnings).
    """

    def __init__(
        self,
        *,
        logical_id: str,
        name: str,
        handler: str,
        environment: Mapping[str, str],
        base_env: Mapping[str, str],
        timeout: int,
        memory: int,
        log_dir: Path,
        code_root: Path = CODE_ROOT,
    ) -> None:
        self.logical_id = logical_id
        self.name = name
        self.arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        self.handler = handler
        self.environment = dict(environment)
        self.timeout = timeout
        self.memory = memory
        self.code_root = code_root
        self.sink = Sink(log_dir / f"{logical_id}.log")
        self.invocations = 0
        self.failures = 0
        self._fn: Callable[[Any, Any], Any] | None = None
        self._env = {
            **base_env,
            **self.environment,
            "AWS_LAMBDA_FUNCTION_NAME": name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory),
            "AWS_LAMBDA_FUNCTION_TIMEOUT": str(timeout),
            "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon locally
        }

    @property
    def metrics(self) -> dict[str, float]:
        """Sums of the function's EMF metrics so far."""
        return self.sink.metrics

    def invoke(self, event: Any) -> Invocation:
        """Run the handler on a JSON round trip of ``event`` in the function's environment
        (imported on first use, in that environment: the cold start)."""
        payload = json.loads(json.dumps(event))
        context = LambdaContext(
            function_name=self.name,
            memory_limit_in_mb=self.memory,
            invoked_function_arn=self.arn,
            log_group_name=f"/aws/lambda/{self.name}",
        )
        self.invocations += 1
        t0 = time.perf_counter()
        with _ROUTER.capture(self.sink), environment(self._env):
            try:
                if self._fn is None:
                    self._fn = load_handler(
                        self.handler,
                        code_root=self.code_root,
                        module_name=f"_lethe_local_{self.logical_id}_{uuid.uuid4().hex[:6]}",
                    )
                result = json.loads(json.dumps(self._fn(payload, context)))
            except Exception as e:  # what Lambda reports for an unhandled exception
                self.failures += 1
                print(
                    json.dumps(
                        {
                            "level": "ERROR",
                            "message": "unhandled exception",
                            "exception_name": f"{type(e).__name__}: {str(e)[:300]}",
                            "stack_trace": traceback.format_exc(),
                        }
                    )
                )
                return Invocation(False, None, f"{type(e).__name__}: {e}", time.perf_counter() - t0)
        return Invocation(True, result, None, time.perf_counter() - t0)


# --- results --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """One delivery of an event source: what went in, what failed."""

    source: str  # queue or bucket
    function: str  # logical id
    messages: int
    failed: int
    invocation: Invocation


@dataclass
class JobRun:
    """An EMR Serverless job run the runtime executed."""

    application_id: str
    id: str
    name: str
    entry_point: str
    arguments: list[str]
    state: str = "SUBMITTED"
    details: str = ""
    seconds: float = 0.0
    output: str = ""


@dataclass(frozen=True, slots=True)
class GcRun:
    """A GC workflow execution and, when it got that far, the run's report."""

    execution: ExecutionResult
    report: GcReport | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.execution.ok


@dataclass(frozen=True, slots=True)
class PumpResult:
    """What :meth:`LocalRuntime.pump_until_idle` did."""

    batches: tuple[BatchOutcome, ...]
    jobs: tuple[JobRun, ...]
    dead_lettered: Mapping[str, int]
    seconds: float

    @property
    def messages(self) -> int:
        return sum(b.messages for b in self.batches)

    @property
    def failed(self) -> int:
        return sum(b.failed for b in self.batches)


@dataclass(frozen=True, slots=True)
class LocalSettings:
    """What the local runtime changes or adds to the template.

    Attributes:
        visibility_timeout: seconds, for every queue the runtime consumes (the template's
            timeouts are 6x the consumer's Lambda timeout: 725 s and 90 min).
        gc_interval: seconds between GC runs started by the runtime's timer (the stand-in for
            the EventBridge schedule); None: only :meth:`LocalRuntime.run_gc`.
        gc_input: fields merged into the schedule's input for timer runs (e.g. ``grace``).
        env_overrides: values for function variables that the template already defines
            (e.g. ``{"LETHE_GC_GRACE": "0s"}``); applied to every function that has one.
        log_dir: where function, job and GC output goes (default: a new temporary directory).
        name_suffix: appended to every resource name (None: a random one, so that several
            runtimes can share one moto server; "" for stable names).
        code_root: the Lambda code root the handler strings are relative to (``functions/``).
    """

    visibility_timeout: int = 1
    gc_interval: float | None = None
    gc_input: Mapping[str, Any] = field(default_factory=dict)
    env_overrides: Mapping[str, str] = field(default_factory=dict)
    log_dir: Path | None = None
    name_suffix: str | None = None
    code_root: Path = CODE_ROOT


@dataclass(frozen=True, slots=True)
class _Queue:
    logical_id: str
    name: str
    url: str
    arn: str
    template_visibility: int | None
    dlq: str | None  # logical id
    max_receive: int | None


@dataclass(frozen=True, slots=True)
class _SqsSource:
    queue: str  # logical id
    function: str
    batch_size: int
    report_failures: bool
    window: int
    max_concurrency: int | None


@dataclass(frozen=True, slots=True)
class _S3Source:
    bucket: str
    function: str
    queue: str  # the local notification queue's logical id
    events: tuple[str, ...]
    prefix: str
    retries: int
    dead_letter: str | None  # queue logical id


# --- the runtime -----------------------------------------------------------------------------------
class LocalRuntime:
    """The stack's template running on moto with the project's handlers and jobs.

    Use :meth:`start`; then :meth:`pump` / :meth:`pump_until_idle` deliver pending events,
    :meth:`run_gc` runs the GC workflow, :meth:`run_forever` serves until Ctrl-C and
    :meth:`stop` tears everything down (also as a context manager).

    Attributes:
        aws: moto's server.
        template: the stack template (a :class:`StackTemplate`).
        outputs: the stack's outputs resolved locally (``TableUri``, ``DeleteQueueUrl``, …).
        functions: logical id -> :class:`LocalFunction`.
        queues: logical id -> queue (name, URL, ARN, redrive).
        job_runs: EMR Serverless job runs executed, in order.
        gc_runs: GC executions, in order.
        log_dir: where function, job and GC output is written.
    """

    def __init__(
        self,
        template: Mapping[str, Any],
        *,
        aws: LocalAws,
        owns_aws: bool,
        settings: LocalSettings,
        echo: Callable[[str], None] | None,
    ) -> None:
        self.aws = aws
        self._owns_aws = owns_aws
        self.settings = settings
        self.echo = echo or (lambda _msg: None)
        self.template = StackTemplate(template)
        self.suffix = uuid.uuid4().hex[:6] if settings.name_suffix is None else settings.name_suffix
        self.log_dir = settings.log_dir or Path(tempfile.mkdtemp(prefix="lethe-local-logs-"))
        self.functions: dict[str, LocalFunction] = {}
        self.queues: dict[str, _Queue] = {}
        self.buckets: dict[str, str] = {}  # logical id -> name
        self.emr_applications: dict[str, dict[str, str]] = {}
        self.outputs: dict[str, str] = {}
        self.unresolved_outputs: dict[str, str] = {}
        self.skipped: dict[str, str] = {}  # logical id -> why it has no local counterpart
        self.job_runs: list[JobRun] = []
        self.gc_runs: list[GcRun] = []
        self.state_machine: LocalStateMachine | None = None
        self._sqs_sources: list[_SqsSource] = []
        self._s3_sources: list[_S3Source] = []
        self._schedule_input: dict[str, Any] = {"dry_run": False}
        self._schedule_expression: str | None = None
        self._jobs_seen: set[str] = set()
        self._dlq_counts: dict[str, int] = {}
        self._outcomes: list[BatchOutcome] = []
        self._next_gc: float | None = None
        self._spark_sink = Sink(self.log_dir / "emr-serverless-spark.log")
        self._gc_sink = Sink(self.log_dir / "gc-workflow.log")
        self._moto_patches: list[tuple[Any, str, Any]] = []
        self._own_spark: Any = None
        self._routed = False
        self._stopped = False
        self._s3 = aws.client("s3")
        self._sqs = aws.client("sqs")
        self._emr = aws.client("emr-serverless")
        self._base_env = dict(os.environ)

    # ------------------------------------------------------------------ start and stop
    @classmethod
    def start(
        cls,
        *,
        template: str | Path | Mapping[str, Any] | None = None,
        context: Mapping[str, object] | None = None,
        aws: LocalAws | None = None,
        port: int = 0,
        settings: LocalSettings | None = None,
        echo: Callable[[str], None] | None = None,
    ) -> LocalRuntime:
        """Start moto (unless ``aws`` is given: it must run in this process) and create the
        template's resources.

        Args:
            template: the template, a path to one, or None to synthesize ``infra/`` (cached).
            context: CDK context values for the synthesis (``{"lethe:tablePrefix": …}``).
            aws: an already running in-process moto server to share.
            port: moto's port when starting one (0: any free port).
            settings: local timeouts, GC timer, log directory (see :class:`LocalSettings`).
            echo: receives one line per thing done (progress output).
        """
        tpl = load_template(template, context=context, echo=echo)
        owns = aws is None
        local = aws or start_moto(port=port)
        rt = cls(tpl, aws=local, owns_aws=owns, settings=settings or LocalSettings(), echo=echo)
        try:
            rt._create()
        except BaseException:
            rt.stop()
            raise
        return rt

    def __enter__(self) -> LocalRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Close the state machine, stop Spark, restore moto's patches, stop moto if ours."""
        if self._stopped:
            return
        self._stopped = True
        if self.state_machine is not None:
            with contextlib.suppress(Exception):
                self.state_machine.close()
            self.state_machine = None
        self._stop_spark()
        if self._routed:
            _ROUTER.uninstall()
            self._routed = False
        for obj, attr, value in reversed(self._moto_patches):
            setattr(obj, attr, value)
        self._moto_patches.clear()
        if self._owns_aws:
            self.aws.stop()

    # ------------------------------------------------------------------ creation
    def _name(self, lid: str, limit: int, *, lower: bool = False) -> str:
        tail = f"-{self.suffix}" if self.suffix else ""
        name = f"{STACK_NAME}-{lid}"[: limit - len(tail)] + tail
        return name.lower() if lower else name

    def _create(self) -> None:
        _ROUTER.install(self._gc_sink)
        self._routed = True
        self._patch_moto()
        self._create_buckets()
        self._create_queues()
        self._create_emr_applications()
        self._create_functions()
        self._wire_sqs_sources()
        self._wire_notifications()
        self._deploy_artifacts()
        self._create_state_machine()
        self._read_schedule()
        self._resolve_outputs()
        for lid, r in self.template.resources.items():
            if lid not in self.template.physical and lid not in self.skipped:
                self.skipped[lid] = str(r.get("Type"))
        if self.settings.gc_interval:
            self._next_gc = time.monotonic() + self.settings.gc_interval

    def _patch_moto(self) -> None:
        """moto marks an EMR Serverless job run SUCCESS the moment it is started; make new
        runs SUBMITTED, so that the state the runtime writes back (RUNNING, SUCCESS, FAILED)
        is the only one anybody sees. A module constant of moto 5.2, checked here."""
        try:
            models = importlib.import_module("moto.emrserverless.models")
        except ImportError:  # pragma: no cover - moto[emrserverless] is a dev dependency
            return
        if getattr(models, "JOB_STATUS", None) != "SUCCESS":
            raise LocalRunError("moto.emrserverless.models.JOB_STATUS moved: update the runtime")
        self._moto_patches.append((models, "JOB_STATUS", "SUCCESS"))
        setattr(models, "JOB_STATUS", "SUBMITTED")  # noqa: B010

    def _create_buckets(self) -> None:
        for lid, props in self.template.of_type("AWS::S3::Bucket").items():
            name = props.get("BucketName") or self._name(lid, 63, lower=True)
            self._s3.create_bucket(Bucket=name)
            status = (props.get("VersioningConfiguration") or {}).get("Status")
            if status == "Enabled":
                self._s3.put_bucket_versioning(
                    Bucket=name, VersioningConfiguration={"Status": "Enabled"}
                )
            self.buckets[lid] = name
            self.template.physical[lid] = Physical(
                name,
                {
                    "Arn": f"arn:aws:s3:::{name}",
                    "DomainName": f"{name}.s3.amazonaws.com",
                    "RegionalDomainName": f"{name}.s3.{REGION}.amazonaws.com",
                },
            )

    def _new_queue(
        self,
        lid: str,
        name: str,
        *,
        attributes: Mapping[str, str],
        template_visibility: int | None,
        dlq: str | None = None,
        max_receive: int | None = None,
    ) -> _Queue:
        url = self._sqs.create_queue(QueueName=name, Attributes=dict(attributes))["QueueUrl"]
        arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
        q = _Queue(lid, name, url, arn, template_visibility, dlq, max_receive)
        self.queues[lid] = q
        self.template.physical[lid] = Physical(
            url, {"Arn": arn, "QueueName": name, "QueueUrl": url}
        )
        return q

    def _create_queues(self) -> None:
        queues = self.template.of_type("AWS::SQS::Queue")
        consumed = {
            self._lid_of(p.get("EventSourceArn"))
            for p in self.template.of_type("AWS::Lambda::EventSourceMapping").values()
        }
        redrives: dict[str, tuple[str, int]] = {}
        for lid, props in queues.items():
            fifo = bool(props.get("FifoQueue"))
            name = props.get("QueueName") or self._name(lid, 75 if fifo else 80)
            if fifo and not name.endswith(".fifo"):
                name += ".fifo"
            attrs: dict[str, str] = {}
            for key in (
                "DelaySeconds",
                "MaximumMessageSize",
                "MessageRetentionPeriod",
                "ReceiveMessageWaitTimeSeconds",
                "FifoQueue",
                "ContentBasedDeduplication",
            ):
                if key in props:
                    v = props[key]
                    attrs[key] = str(v).lower() if isinstance(v, bool) else str(v)
            visibility = props.get("VisibilityTimeout")
            if lid in consumed:
                attrs["VisibilityTimeout"] = str(self.settings.visibility_timeout)
            elif visibility is not None:
                attrs["VisibilityTimeout"] = str(visibility)
            redrive = props.get("RedrivePolicy")
            dlq_lid = self._lid_of(redrive.get("deadLetterTargetArn")) if redrive else None
            if redrive and dlq_lid:
                redrives[lid] = (dlq_lid, int(redrive["maxReceiveCount"]))
            self._new_queue(
                lid,
                name,
                attributes=attrs,
                template_visibility=None if visibility is None else int(visibility),
                dlq=dlq_lid,
                max_receive=redrives.get(lid, (None, None))[1],
            )
        for lid, (dlq_lid, count) in redrives.items():
            policy = {"deadLetterTargetArn": self.queues[dlq_lid].arn, "maxReceiveCount": count}
            self._sqs.set_queue_attributes(
                QueueUrl=self.queues[lid].url, Attributes={"RedrivePolicy": json.dumps(policy)}
            )

    def _create_emr_applications(self) -> None:
        for lid, props in self.template.of_type("AWS::EMRServerless::Application").items():
            name = self._name(lid, 64)
            app = self._emr.create_application(
                name=name,
                releaseLabel=MOTO_EMR_RELEASE_LABEL,
                type=str(props.get("Type", "SPARK")),
            )
            app_id = str(app["applicationId"])
            self.emr_applications[lid] = {
                "id": app_id,
                "name": name,
                "release_label": str(props.get("ReleaseLabel", "")),
                "architecture": str(props.get("Architecture", "")),
            }
            self.template.physical[lid] = Physical(
                app_id, {"ApplicationId": app_id, "Arn": str(app["arn"])}
            )

    def _create_functions(self) -> None:
        functions = self.template.of_type("AWS::Lambda::Function")
        # names and ARNs first: environments may reference other functions
        names = {
            lid: props.get("FunctionName") or self._name(lid, 64)
            for lid, props in functions.items()
        }
        for lid, name in names.items():
            self.template.physical[lid] = Physical(
                name, {"Arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"}
            )
        for lid, r in self.template.of_type("AWS::IAM::Role").items():
            role = r.get("RoleName") or self._name(lid, 64)
            self.template.physical[lid] = Physical(
                role, {"Arn": f"arn:aws:iam::{ACCOUNT}:role/{role}", "RoleId": f"AROA{lid[:16]}"}
            )
        # Our functions share one code asset (functions/); CDK's own handlers have others.
        ours = {
            json.dumps(props.get("Code"), sort_keys=True)
            for props in functions.values()
            if _handler_file(str(props.get("Handler", "")), self.settings.code_root) is not None
        }
        overrides = self.settings.env_overrides
        for lid, props in functions.items():
            variables = (props.get("Environment") or {}).get("Variables") or {}
            env: dict[str, str] = {}
            unresolved: list[str] = []
            for k, v in variables.items():
                if k in overrides:
                    env[k] = overrides[k]
                    continue
                value, why = self.template.try_resolve(v)
                if why is not None:
                    unresolved.append(f"{k}: {why}")
                else:
                    env[k] = str(value)
            fn = LocalFunction(
                logical_id=lid,
                name=names[lid],
                handler=str(props.get("Handler", "")),
                environment=env,
                base_env=self._base_env,
                timeout=int(props.get("Timeout", 3)),
                memory=int(props.get("MemorySize", 128)),
                log_dir=self.log_dir,
                code_root=self.settings.code_root,
            )
            if json.dumps(props.get("Code"), sort_keys=True) not in ours:
                self.skipped[lid] = f"handler {fn.handler!r}: CDK-provided code, not functions/"
                continue
            if unresolved:
                raise LocalRunError(f"function {lid}: cannot resolve {unresolved}")
            self.functions[lid] = fn

    def _lid_of(self, value: Any) -> str | None:
        """The logical id an intrinsic (``Ref``/``Fn::GetAtt``) points at, if it is one."""
        if isinstance(value, dict) and len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return str(arg)
            if key == "Fn::GetAtt":
                return str(arg.split(".", 1)[0] if isinstance(arg, str) else arg[0])
        return None

    def _function_lid(self, value: Any) -> str | None:
        lid = self._lid_of(value)
        if lid is not None:
            return lid
        text = str(value)
        for flid, fn in self.functions.items():
            if text in (fn.name, fn.arn):
                return flid
        return None

    def _wire_sqs_sources(self) -> None:
        for lid, props in self.template.of_type("AWS::Lambda::EventSourceMapping").items():
            queue = self._lid_of(props.get("EventSourceArn"))
            fn = self._function_lid(props.get("FunctionName"))
            if queue not in self.queues or fn not in self.functions:
                self.skipped[lid] = "event source mapping not from an SQS queue of the template"
                continue
            assert queue is not None and fn is not None
            if props.get("Enabled") is False:
                self.skipped[lid] = "disabled in the template"
                continue
            self._sqs_sources.append(
                _SqsSource(
                    queue=queue,
                    function=fn,
                    batch_size=int(props.get("BatchSize", 10)),
                    report_failures="ReportBatchItemFailures"
                    in (props.get("FunctionResponseTypes") or []),
                    window=int(props.get("MaximumBatchingWindowInSeconds", 0)),
                    max_concurrency=(props.get("ScalingConfig") or {}).get("MaximumConcurrency"),
                )
            )
            self.template.physical[lid] = Physical(f"local-esm-{lid}")

    def _async_config(self, fn_lid: str) -> tuple[int, str | None]:
        """(MaximumRetryAttempts, dead-letter queue logical id) of a function."""
        retries = 2  # Lambda's default for asynchronous invocations
        for props in self.template.of_type("AWS::Lambda::EventInvokeConfig").values():
            if self._function_lid(props.get("FunctionName")) == fn_lid:
                retries = int(props.get("MaximumRetryAttempts", retries))
                on_failure = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get(
                    "Destination"
                )
                if on_failure is not None and self._lid_of(on_failure) in self.queues:
                    return retries, self._lid_of(on_failure)
        props = self.template.resources[fn_lid].get("Properties") or {}
        target = (props.get("DeadLetterConfig") or {}).get("TargetArn")
        dlq = self._lid_of(target) if target is not None else None
        return retries, dlq if dlq in self.queues else None

    def _wire_notifications(self) -> None:
        for lid, props in self.template.of_type("Custom::S3BucketNotifications").items():
            bucket_lid = self._lid_of(props.get("BucketName"))
            if bucket_lid not in self.buckets:
                self.skipped[lid] = "notifications of a bucket outside the template"
                continue
            assert bucket_lid is not None
            config = props.get("NotificationConfiguration") or {}
            queue_configs: list[dict[str, Any]] = []
            for c in config.get("LambdaFunctionConfigurations", []):
                fn = self._function_lid(c.get("LambdaFunctionArn"))
                if fn not in self.functions:
                    raise LocalRunError(f"{lid}: notifies a function without a local handler")
                assert fn is not None
                qlid = f"{fn}S3Events"
                q = self._new_queue(
                    qlid,
                    self._name(qlid, 80),
                    attributes={"VisibilityTimeout": str(self.settings.visibility_timeout)},
                    template_visibility=None,
                )
                rules = (c.get("Filter") or {}).get("Key", {}).get("FilterRules", [])
                prefix = next((r["Value"] for r in rules if r["Name"].lower() == "prefix"), "")
                retries, dlq = self._async_config(fn)
                self._s3_sources.append(
                    _S3Source(
                        bucket=bucket_lid,
                        function=fn,
                        queue=qlid,
                        events=tuple(c.get("Events", [])),
                        prefix=prefix,
                        retries=retries,
                        dead_letter=dlq,
                    )
                )
                local = {"QueueArn": q.arn, "Events": list(c.get("Events", []))}
                if c.get("Filter"):
                    local["Filter"] = c["Filter"]
                queue_configs.append(local)
            for c in config.get("QueueConfigurations", []):
                queue_configs.append(self.template.resolve(c))
            if config.get("TopicConfigurations"):
                self.skipped[f"{lid}.TopicConfigurations"] = "SNS notifications are not wired"
            self._s3.put_bucket_notification_configuration(
                Bucket=self.buckets[bucket_lid],
                NotificationConfiguration={"QueueConfigurations": queue_configs},
            )
            self.template.physical[lid] = Physical(f"local-notifications-{lid}")

    def _deploy_artifacts(self) -> None:
        """``Custom::CDKBucketDeployment`` of ``spark_jobs/``: upload the local entry points."""
        for lid, props in self.template.of_type("Custom::CDKBucketDeployment").items():
            bucket = self._lid_of(props.get("DestinationBucketName"))
            if bucket not in self.buckets or not SPARK_JOBS.is_dir():
                self.skipped[lid] = "bucket deployment of something other than spark_jobs/"
                continue
            assert bucket is not None
            prefix = str(props.get("DestinationBucketKeyPrefix", ""))
            for f in sorted(SPARK_JOBS.glob("*.py")):
                self._s3.put_object(
                    Bucket=self.buckets[bucket], Key=f"{prefix}{f.name}", Body=f.read_bytes()
                )
            self.template.physical[lid] = Physical(f"local-deployment-{lid}")

    def _create_state_machine(self) -> None:
        machines = self.template.of_type("AWS::StepFunctions::StateMachine")
        if not machines:
            return
        if len(machines) > 1:
            raise LocalRunError("the local runtime runs one state machine; found several")
        ((lid, props),) = machines.items()
        referenced = {f for f in self.functions if f in json.dumps(props.get("DefinitionString"))}
        env: dict[str, str] = {}
        for f in sorted(referenced):
            for k, v in self.functions[f].environment.items():
                if env.get(k, v) != v:
                    raise LocalRunError(
                        f"GC functions disagree on {k}; the local runner shares one environment"
                    )
                env[k] = v
        with environment({**self._base_env, "MOTO_PORT": str(self.aws.port)}):
            self.state_machine = LocalStateMachine.from_template(
                self.template.template,
                aws=self.aws,
                environment=env,
                code_root=self.settings.code_root,
            )
        arn = self.state_machine.arn
        self.template.physical[lid] = Physical(arn, {"Name": arn.rsplit(":", 1)[-1], "Arn": arn})

    def _read_schedule(self) -> None:
        for lid, props in self.template.of_type("AWS::Events::Rule").items():
            for target in props.get("Targets", []):
                if self._lid_of(target.get("Arn")) in self.template.of_type(
                    "AWS::StepFunctions::StateMachine"
                ):
                    self._schedule_expression = props.get("ScheduleExpression")
                    raw = target.get("Input")
                    if raw:
                        self._schedule_input = json.loads(raw)
                    self.template.physical[lid] = Physical(f"local-timer-{lid}")

    def _resolve_outputs(self) -> None:
        for name, out in (self.template.template.get("Outputs") or {}).items():
            value, why = self.template.try_resolve(out.get("Value"))
            if why is None:
                self.outputs[name] = str(value)
            else:
                self.unresolved_outputs[name] = why

    # ------------------------------------------------------------------ lookups
    def function(self, key: str) -> LocalFunction:
        """A function by logical id, handler string (``"splice.handler.handler"``), or name."""
        for lid, f in self.functions.items():
            if key in (lid, f.handler, f.name):
                return f
        raise KeyError(f"no local function {key!r}; have {sorted(self.functions)}")

    def queue(self, key: str) -> _Queue:
        """A queue by logical id, name, URL, or stack output name (``"DeleteQueueUrl"``)."""
        key = self.outputs.get(key, key)
        for q in self.queues.values():
            if key in (q.logical_id, q.name, q.url, q.arn):
                return q
        raise KeyError(f"no queue {key!r}")

    @property
    def table_uri(self) -> str:
        return self.outputs["TableUri"]

    @property
    def bucket(self) -> str:
        return self.outputs["TableBucketName"]

    @property
    def incoming_prefix(self) -> str:
        return self._s3_sources[0].prefix if self._s3_sources else "incoming/"

    def queue_depth(self, key: str) -> dict[str, int]:
        """Approximate visible / in-flight / delayed message counts of a queue."""
        a = self._sqs.get_queue_attributes(
            QueueUrl=self.queue(key).url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return {
            "visible": int(a.get("ApproximateNumberOfMessages", 0)),
            "in_flight": int(a.get("ApproximateNumberOfMessagesNotVisible", 0)),
            "delayed": int(a.get("ApproximateNumberOfMessagesDelayed", 0)),
        }

    def peek(self, key: str, *, max_messages: int = 10) -> list[dict[str, Any]]:
        """Read messages of a queue (a DLQ, say) without consuming them: received, then made
        visible again at once."""
        url = self.queue(key).url
        r = self._sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=max(1, min(10, max_messages)),
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
            VisibilityTimeout=0,
        )
        return list(r.get("Messages", []))

    def describe(self) -> list[str]:
        """Human-readable lines: what was created and how it maps."""
        lines = [f"moto on {self.aws.endpoint} (account {ACCOUNT}, {REGION})"]
        for lid, name in self.buckets.items():
            lines.append(f"bucket   {name:<44} {lid}")
        for q in self.queues.values():
            redrive = (
                f" -> DLQ {self.queues[q.dlq].name} after {q.max_receive} receives" if q.dlq else ""
            )
            vis = ""
            if any(s.queue == q.logical_id for s in self._sqs_sources) or any(
                s.queue == q.logical_id for s in self._s3_sources
            ):
                was = f"{q.template_visibility}s" if q.template_visibility is not None else "-"
                vis = f" visibility {self.settings.visibility_timeout}s (template {was})"
            lines.append(f"queue    {q.name:<44}{vis}{redrive}")
        for s in self._sqs_sources:
            f = self.functions[s.function]
            lines.append(
                f"sqs      {self.queues[s.queue].name} -> {f.handler} "
                f"(batch {s.batch_size}, partial failures: {s.report_failures})"
            )
        for n in self._s3_sources:
            f = self.functions[n.function]
            dlq = f", then DLQ {self.queues[n.dead_letter].name}" if n.dead_letter else ""
            lines.append(
                f"s3       {self.buckets[n.bucket]}/{n.prefix}* {','.join(n.events)} -> "
                f"{self.queues[n.queue].name} -> {f.handler} (async: {n.retries} retries{dlq})"
            )
        for app in self.emr_applications.values():
            lines.append(
                f"emr      application {app['id']} ({app['release_label']} in the template; "
                "job runs executed here with local Spark)"
            )
        if self.state_machine is not None:
            lines.append(f"sfn      {self.state_machine.arn} (moto's interpreter)")
        if self._schedule_expression:
            timer = (
                f"every {self.settings.gc_interval:g}s"
                if self.settings.gc_interval
                else "on demand (run_gc)"
            )
            lines.append(f"schedule {self._schedule_expression} in the template; locally {timer}")
        lines.append(f"logs     {self.log_dir}")
        return lines

    # ------------------------------------------------------------------ event delivery
    def pump(self, *, only: Collection[str] | None = None) -> int:
        """One pass over every event source; returns how many events were delivered.

        Args:
            only: deliver only to these functions (logical ids, handler strings or names);
                no job runs and no timer then.
        """
        wanted = None if only is None else {self.function(k).logical_id for k in only}
        done = 0
        for n in self._s3_sources:
            if wanted is None or n.function in wanted:
                done += self._pump_s3(n)
        if wanted is None:
            done += self._pump_jobs()
        for s in self._sqs_sources:
            if wanted is None or s.function in wanted:
                done += self._pump_sqs(s)
        self._watch_dead_letters()
        if wanted is None and self._next_gc is not None and time.monotonic() >= self._next_gc:
            assert self.settings.gc_interval is not None
            self._next_gc = time.monotonic() + self.settings.gc_interval
            self.run_gc(**{**self._schedule_input, **self.settings.gc_input})
            done += 1
        return done

    def pump_until_idle(self, *, timeout: float = 600, poll: float = 0.2) -> PumpResult:
        """Deliver events until no queue holds a message (visible or in flight: failed
        messages are waited for until they come back, and go to their DLQ in the end) and no
        job run is waiting.

        Raises:
            LocalRunError: still busy after ``timeout`` seconds.
        """
        t0 = time.monotonic()
        outcomes_before = len(self._outcomes)
        jobs_before = len(self.job_runs)
        dlq_before = dict(self._dlq_counts)
        while True:
            if self.pump() == 0:
                busy = self._busy()
                if not busy:
                    break
                if time.monotonic() - t0 > timeout:
                    raise LocalRunError(f"not idle after {timeout:g}s: {', '.join(busy)}")
                time.sleep(poll)
        dead = {
            self.queues[lid].name: n - dlq_before.get(lid, 0)
            for lid, n in self._dlq_counts.items()
            if n > dlq_before.get(lid, 0)
        }
        return PumpResult(
            tuple(self._outcomes[outcomes_before:]),
            tuple(self.job_runs[jobs_before:]),
            dead,
            time.monotonic() - t0,
        )

    def _busy(self) -> list[str]:
        busy = []
        for lid in [s.queue for s in self._sqs_sources] + [n.queue for n in self._s3_sources]:
            d = self.queue_depth(lid)
            if any(d.values()):
                busy.append(f"{self.queues[lid].name} {d}")
        return busy

    def _receive(self, url: str, want: int) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        while len(got) < want:
            r = self._sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=min(10, want - len(got)),
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
                WaitTimeSeconds=0,
            )
            batch = r.get("Messages", [])
            if not batch:
                break
            got.extend(batch)
        return got

    def _delete(self, url: str, messages: Sequence[Mapping[str, Any]]) -> None:
        for i in range(0, len(messages), 10):
            chunk = messages[i : i + 10]
            r = self._sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(chunk)
                ],
            )
            if r.get("Failed"):
                raise LocalRunError(f"DeleteMessageBatch failed: {r['Failed']}")

    def _pump_sqs(self, s: _SqsSource) -> int:
        q = self.queues[s.queue]
        fn = self.functions[s.function]
        msgs = self._receive(q.url, s.batch_size)
        if not msgs:
            return 0
        problems = len(fn.sink.problems)
        inv = fn.invoke(sqs_event(msgs, queue_arn=q.arn, region=REGION))
        failed_ids = self._failed_ids(s, msgs, inv)
        self._delete(q.url, [m for m in msgs if m["MessageId"] not in failed_ids])
        outcome = BatchOutcome(q.name, s.function, len(msgs), len(failed_ids), inv)
        self._outcomes.append(outcome)
        self._timeout_note(fn, inv)
        text = f"sqs {q.name} -> {fn.handler}: batch of {len(msgs)}"
        if not failed_ids:
            text += f", all done in {inv.seconds:.2f}s"
        else:
            counts = sorted(
                {
                    int(m.get("Attributes", {}).get("ApproximateReceiveCount", 0))
                    for m in msgs
                    if m["MessageId"] in failed_ids
                }
            )
            limit = f"/{q.max_receive}" if q.max_receive else ""
            new = fn.sink.problems[problems:]
            own = [p for p in new if not p.startswith("unhandled exception")]
            logged = "; ".join(dict.fromkeys((own or new)[:2]))
            why = logged or (inv.error or "").split("\n", 1)[0]
            text += (
                f", {len(msgs) - len(failed_ids)} done, {len(failed_ids)} failed "
                f"(receive {','.join(map(str, counts))}{limit}; back after "
                f"{self.settings.visibility_timeout}s) in {inv.seconds:.2f}s"
                + (f": {why[:160]}" if why else "")
            )
        self.echo(text)
        return len(msgs)

    @staticmethod
    def _failed_ids(s: _SqsSource, msgs: Sequence[Mapping[str, Any]], inv: Invocation) -> set[str]:
        """The messages Lambda would leave on the queue after this invocation."""
        ids = {str(m["MessageId"]) for m in msgs}
        if not inv.ok:
            return ids
        if not s.report_failures or inv.result is None:
            return set()
        if not isinstance(inv.result, dict):
            return ids  # an unparseable response fails the whole batch
        items = inv.result.get("batchItemFailures")
        if items is None:
            return set()
        failed: set[str] = set()
        for item in items:
            ident = item.get("itemIdentifier") if isinstance(item, dict) else None
            if not ident or ident not in ids:
                return ids  # Lambda treats a bad identifier as a failure of the whole batch
            failed.add(str(ident))
        return failed

    def _timeout_note(self, fn: LocalFunction, inv: Invocation) -> None:
        if inv.seconds > fn.timeout:
            self.echo(
                f"note: {fn.handler} ran {inv.seconds:.0f}s, over its {fn.timeout}s timeout "
                "(AWS would have stopped it)"
            )

    def _pump_s3(self, n: _S3Source) -> int:
        q = self.queues[n.queue]
        fn = self.functions[n.function]
        msgs = self._receive(q.url, 10)
        delivered = 0
        for m in msgs:
            body = json.loads(m["Body"])
            if body.get("Event") == "s3:TestEvent":
                self._delete(q.url, [m])
                continue
            delivered += 1
            keys = [unquote_plus(r["s3"]["object"]["key"]) for r in body.get("Records", [])]
            attempts: list[Invocation] = []
            for _ in range(1 + n.retries):
                inv = fn.invoke(body)
                attempts.append(inv)
                self._timeout_note(fn, inv)
                if inv.ok:
                    break
            last = attempts[-1]
            what = f"s3 {self.buckets[n.bucket]}/{','.join(keys)} -> {fn.handler}"
            if last.ok:
                summary = _brief(last.result)
                tries = f" (after {len(attempts) - 1} retries)" if len(attempts) > 1 else ""
                self.echo(f"{what}: {summary} in {last.seconds:.2f}s{tries}")
            else:
                dest = ""
                if n.dead_letter:
                    dlq = self.queues[n.dead_letter]
                    self._sqs.send_message(
                        QueueUrl=dlq.url,
                        MessageBody=json.dumps(body),
                        MessageAttributes={
                            "RequestID": {"DataType": "String", "StringValue": str(uuid.uuid4())},
                            "ErrorCode": {"DataType": "Number", "StringValue": "200"},
                            "ErrorMessage": {
                                "DataType": "String",
                                "StringValue": (last.error or "")[:256],
                            },
                        },
                    )
                    dest = f"; event sent to DLQ {dlq.name}"
                error = (last.error or "").split("\n", 1)[0][:200]
                self.echo(f"{what}: failed {len(attempts)} times: {error}{dest}")
            self._delete(q.url, [m])
        return delivered

    def _watch_dead_letters(self) -> None:
        for q in self.queues.values():
            if not any(q.logical_id == other.dlq for other in self.queues.values()) and not any(
                q.logical_id == n.dead_letter for n in self._s3_sources
            ):
                continue
            d = self.queue_depth(q.logical_id)
            n = d["visible"] + d["in_flight"] + d["delayed"]
            before = self._dlq_counts.get(q.logical_id, 0)
            if n > before:
                self.echo(f"dead-letter queue {q.name}: {n - before} new message(s), {n} in all")
            self._dlq_counts[q.logical_id] = n

    # ------------------------------------------------------------------ EMR Serverless
    def _pump_jobs(self) -> int:
        ran = 0
        for app in self.emr_applications.values():
            kw: dict[str, Any] = {"applicationId": app["id"]}
            runs: list[dict[str, Any]] = []
            while True:
                page = self._emr.list_job_runs(**kw)
                runs.extend(page.get("jobRuns", []))
                if not page.get("nextToken"):
                    break
                kw["nextToken"] = page["nextToken"]
            for r in runs:
                if r["id"] in self._jobs_seen or r.get("state") in ("CANCELLED", "FAILED"):
                    continue
                self._jobs_seen.add(r["id"])
                self._run_job(app["id"], str(r["id"]))
                ran += 1
        return ran

    def _set_job_state(self, app_id: str, run_id: str, state: str, details: str = "") -> None:
        try:
            backends = importlib.import_module("moto.emrserverless.models").emrserverless_backends
            run = backends[ACCOUNT][REGION].get_job_run(app_id, run_id)
        except Exception:  # moto internals moved: the runtime's own record still holds
            return
        run.state = state
        run.state_details = details or None
        run.updated_at = datetime.now(UTC)

    def _run_job(self, app_id: str, run_id: str) -> JobRun:
        d = self._emr.get_job_run(applicationId=app_id, jobRunId=run_id)["jobRun"]
        driver = (d.get("jobDriver") or {}).get("sparkSubmit") or {}
        entry = str(driver.get("entryPoint", ""))
        args = [str(a) for a in driver.get("entryPointArguments", [])]
        job = JobRun(app_id, run_id, str(d.get("name", "")), entry, args)
        self.job_runs.append(job)
        self._set_job_state(app_id, run_id, "RUNNING")
        t0 = time.perf_counter()
        out = Sink(self.log_dir / f"job-{run_id}.log")
        try:
            module = self._job_module(entry)
            with (
                _fd_redirect(self._spark_sink.path),
                self._shared_spark(),
                _ROUTER.capture(out),
                contextlib.redirect_stderr(_SinkStream(out)),
            ):
                print(f"$ spark-submit {entry} {' '.join(args)}")
                rc = module.main(args)
            job.output = out.path.read_text(encoding="utf-8") if out.path.is_file() else ""
            job.state = "SUCCESS" if rc in (0, None) else "FAILED"
            job.details = "" if job.state == "SUCCESS" else f"exit code {rc}"
        except SystemExit as e:  # argparse errors
            job.state, job.details = "FAILED", f"exit code {e.code}"
        except Exception as e:
            job.state, job.details = "FAILED", f"{type(e).__name__}: {e}"
            out.write(traceback.format_exc())
        job.seconds = time.perf_counter() - t0
        self._set_job_state(app_id, run_id, job.state, job.details)
        last = [ln for ln in job.output.splitlines() if ln.strip()][-1:] or [job.details]
        shown = " ".join(a.rsplit("/", 1)[-1] if a.startswith("s3://") else a for a in args)
        self.echo(
            f"emr-serverless job run {run_id} ({Path(entry).name} {shown[:80]}): "
            f"{job.state} in {job.seconds:.1f}s: {last[0][:240]}"
        )
        return job

    def _job_module(self, entry: str) -> ModuleType:
        """The local module of an entry point ``s3://<artifacts>/spark_jobs/<name>.py``,
        after checking that EMR would find the object."""
        if entry.startswith("s3://"):
            bucket, _, key = entry[5:].partition("/")
            try:
                self._s3.head_object(Bucket=bucket, Key=key)
            except Exception as e:
                raise LocalRunError(f"entry point {entry} does not exist") from e
        name = Path(entry).name
        local = SPARK_JOBS / name
        if not name.endswith(".py") or not local.is_file():
            raise LocalRunError(f"no local job for {entry}: {local} does not exist")
        module = importlib.import_module(f"spark_jobs.{local.stem}")
        if not callable(getattr(module, "main", None)):
            raise LocalRunError(f"{local} has no main(argv)")
        return module

    @contextlib.contextmanager
    def _shared_spark(self) -> Iterator[None]:
        """Jobs share one local SparkSession, like the pre-initialized capacity of an EMR
        Serverless application: the active one (e.g. a test's), or one the runtime starts
        (the JVM inherits the Spark log as its stdout and stderr). A job's own
        ``spark.stop()`` (right under spark-submit, whose process ends with the job) is a
        no-op for that shared session while the job runs."""
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        if session is None:
            from spark_jobs._session import build_session as build

            session = build("lethe-local-emr-serverless")
            self._own_spark = session
        original = SparkSession.stop

        def stop(this: Any) -> None:
            if this is not session:
                original(this)

        setattr(SparkSession, "stop", stop)  # noqa: B010
        try:
            yield
        finally:
            setattr(SparkSession, "stop", original)  # noqa: B010

    def _stop_spark(self) -> None:
        session, self._own_spark = self._own_spark, None
        if session is None:
            return
        try:
            with _fd_redirect(self._spark_sink.path):
                session.stop()
        except Exception:  # pragma: no cover - best effort at shutdown
            pass

    # ------------------------------------------------------------------ GC
    def run_gc(
        self,
        *,
        dry_run: bool = False,
        name: str | None = None,
        timeout: float = 600,
        **fields: Any,
    ) -> GcRun:
        """Run the GC state machine once (on moto's interpreter) and read its report.

        Args:
            dry_run: report only.
            name: execution name (default ``gc-<time>-<random>``).
            timeout: seconds to wait for the execution.
            **fields: more input for the Plan step (``table``, ``retention``, ``grace``,
                ``erasure_grace``), overriding the functions' settings for this run.
        """
        if self.state_machine is None:
            raise LocalRunError("the template has no state machine")
        payload = {"dry_run": dry_run, **{k: v for k, v in fields.items() if v is not None}}
        name = name or f"gc-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
        t0 = time.perf_counter()
        # the interpreter invokes the functions from its own threads: the background sink
        execution = self.state_machine.run(payload, name=name, timeout=timeout)
        report = None
        if execution.ok and isinstance(execution.output, dict):
            report = self._gc_report(execution.output)
        run = GcRun(execution, report, time.perf_counter() - t0)
        self.gc_runs.append(run)
        states = len(execution.states)
        text = f"step functions {name}: {execution.status} in {run.seconds:.1f}s, {states} states"
        if report is not None:
            text += (
                f"; {report.objects_deleted} objects ({report.bytes_deleted:,} bytes) "
                f"{'would be ' if report.dry_run else ''}deleted, "
                f"{len(report.complete_erasures)}/{len(report.erasures)} erasures complete"
            )
        elif execution.error:
            text += f": {execution.error}: {(execution.cause or '')[:200]}"
        self.echo(text)
        return run

    def _gc_report(self, output: Mapping[str, Any]) -> GcReport | None:
        from lethe.store import parse_s3_uri

        plan = output.get("plan") or {}  # the workflow's Compact state keeps table and run id
        table = output.get("table") or plan.get("table")
        run_id = output.get("run_id") or plan.get("run_id")
        if not table or not run_id:
            return None
        bucket, prefix = parse_s3_uri(str(table))
        key = f"{prefix}/_gc/{run_id}/report.json" if prefix else f"_gc/{run_id}/report.json"
        try:
            body = self._s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception:
            return None
        return GcReport.model_validate_json(body)

    # ------------------------------------------------------------------ serve
    def run_forever(self, *, poll: float = 0.5) -> None:
        """Deliver events until interrupted (Ctrl-C / SIGTERM)."""
        stop = threading.Event()

        def on_term(signum: int, frame: FrameType | None) -> None:
            stop.set()

        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, on_term)
        try:
            while not stop.is_set():
                if self.pump() == 0:
                    stop.wait(poll)
                if len(self._outcomes) > 2000:  # serving for hours: keep the recent ones
                    del self._outcomes[:-1000]
        except KeyboardInterrupt:
            pass
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)


def _brief(result: Any, limit: int = 200) -> str:
    """A handler's JSON result for one progress line: without null, false and empty values."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if x not in (None, False, "", [], {})}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    text = "ok" if result is None else json.dumps(strip(result), separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- command line ------------------------------------------------------------------------------------
def _parse_context(pairs: Sequence[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"-c expects key=value, got {pair!r}")
        out[key] = value
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m devtools.local.runtime``: serve the stack locally until Ctrl-C."""
    p = argparse.ArgumentParser(
        prog="python -m devtools.local.runtime",
        description="Run Lethe's CDK stack locally: moto on 127.0.0.1, the project's handlers "
        "and Spark jobs in this process.",
    )
    p.add_argument("--port", type=int, default=5000, help="moto's port (default 5000)")
    p.add_argument("--template", default=None, help="a synthesized *.template.json to use")
    p.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--refresh-template", action="store_true", help="re-synthesize, ignore cache")
    p.add_argument("--visibility-timeout", type=int, default=1, metavar="SECONDS")
    p.add_argument(
        "--gc-every", type=float, default=600, metavar="SECONDS", help="0: no timer (default 600)"
    )
    p.add_argument("--gc-grace", default=None, help="grace for timer GC runs (template: 7d)")
    p.add_argument("--log-dir", default=None, help="default: a new temporary directory")
    args = p.parse_args(argv)

    def echo(msg: str) -> None:
        print(f"[{datetime.now():%H:%M:%S}] {msg}", flush=True)

    context = _parse_context(args.context)
    if args.refresh_template and args.template is None:
        load_template(context=context, refresh=True, echo=echo)
    settings = LocalSettings(
        visibility_timeout=args.visibility_timeout,
        gc_interval=args.gc_every or None,
        gc_input={"grace": args.gc_grace} if args.gc_grace else {},
        log_dir=Path(args.log_dir) if args.log_dir else None,
        name_suffix="",
    )
    rt = LocalRuntime.start(
        template=args.template, context=context, port=args.port, settings=settings, echo=echo
    )
    try:
        for line in rt.describe():
            echo(line)
        echo("outputs:")
        for k, v in sorted(rt.outputs.items()):
            echo(f"  {k:<26} {v}")
        echo(
            f"point clients here: export AWS_ENDPOINT_URL={rt.aws.endpoint} "
            "AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1"
        )
        echo(
            f"e.g. lethe create {rt.table_uri} --schema sample.parquet --key id; upload to "
            f"s3://{rt.bucket}/{rt.incoming_prefix}; send delete requests to "
            f"{rt.outputs.get('DeleteQueueUrl')}"
        )
        echo("serving (Ctrl-C to stop)")
        rt.run_forever()
    finally:
        echo("stopping")
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut it short
        rt.stop()
        echo("stopped")
    return 0


if __name__ == "__main__":
    run_main(main)

"""The local event-driven runtime: the synthesized CDK stack, run against moto on 127.0.0.1.

``python -m devtools.local.runtime`` starts moto's server, creates what the stack's template
describes and then delivers events to the project's own handlers until Ctrl-C. As a library::

    rt = LocalRuntime.start()             # moto + resources from the template
    s3.put_object(Bucket=rt.bucket, Key="incoming/x.parquet", Body=...)
    rt.pump_until_idle()                  # S3 event -> ingest trigger -> table
    rt.run_gc(retention="1v")             # the GC state machine on moto's interpreter
    rt.stop()

Everything is read from the template (synthesized in-process from ``infra/``, cached by a
hash of its inputs; see :func:`devtools.local.template.load_template`) by a small reader
that resolves ``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub``, ``Fn::Select`` and
``Fn::Split`` to local names and ARNs. This module composes the parts, one module each:
:mod:`~devtools.local.template` (synthesis, reader), :mod:`~devtools.local.sqs` (queues and
event sources), :mod:`~devtools.local.functions` (in-process Lambda functions),
:mod:`~devtools.local.emr` (job runs), :mod:`~devtools.local.workflow` (the GC state machine
and schedule) and :mod:`~devtools.local.output` (logs and metrics). How each piece maps
(``docs/local.md`` has the long form):

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
                               deletes exactly the messages not in ``batchItemFailures``;
                               up to ``MaximumConcurrency`` batches at once
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
``AWS::Glue::Database``        a moto Glue database of the declared name (the Iceberg view's
                               Glue table is created in it by its function)
``Custom::CDKBucket            ``spark_jobs/*.py`` uploaded to the artifacts bucket
Deployment``
IAM, KMS, logs, alarms, SNS    not created (moto would not enforce them)
=============================  ==============================================================

Handlers print their Powertools logs and metrics (EMF) to stdout; the runtime routes each
function's output to ``<log dir>/<function>.log`` and sums its metrics
(:attr:`LocalFunction.metrics`), the local stand-in for CloudWatch.

What cannot be mimicked: Lambda timeouts and memory limits (an in-process handler cannot be
interrupted; a run longer than the function's timeout is reported), concurrency other than
an SQS mapping's ``MaximumConcurrency`` (that many batches at once, each in its own
execution environment; everything else one event at a time), batching windows (batches
are whatever is visible), and the delays between asynchronous retries (immediate here).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from devtools.local.common import ACCOUNT, CODE_ROOT, REGION, SPARK_JOBS, LocalRunError, Names
from devtools.local.emr import JobRun, LocalEmr
from devtools.local.functions import Invocation, LocalFunction, functions_from_template
from devtools.local.output import ROUTER, Sink
from devtools.local.server import LocalAws, start_moto
from devtools.local.sqs import BatchOutcome, EventSources, Queue, SqsSource, failed_ids
from devtools.local.stepfunctions import LocalStateMachine
from devtools.local.template import Parts, Physical, StackTemplate, lid_of, load_template
from devtools.local.workflow import GcRun, LocalWorkflow
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
]

# The runtime was one module before issue 11; tests/test_e2e.py imports this name from here.
_SqsSource = SqsSource


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
        events, emr, gc: the parts (:class:`EventSources`, :class:`LocalEmr`,
            :class:`LocalWorkflow`).
    """

    # Lambda's rules for partial batch failures (tests call them by this name).
    _failed_ids = staticmethod(failed_ids)

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
        self.names = Names(self.suffix)
        self._renamed_env: dict[str, str] = {}  # function variables that follow a renaming
        self.log_dir = settings.log_dir or Path(tempfile.mkdtemp(prefix="lethe-local-logs-"))
        self.functions: dict[str, LocalFunction] = {}
        self.buckets: dict[str, str] = {}  # logical id -> name
        self.outputs: dict[str, str] = {}
        self.unresolved_outputs: dict[str, str] = {}
        self.skipped: dict[str, str] = {}  # logical id -> why it has no local counterpart
        self._next_gc: float | None = None
        self._gc_sink = Sink(self.log_dir / "gc-workflow.log")
        self._routed = False
        self._stopped = False
        self._s3 = aws.client("s3")
        self._base_env = dict(os.environ)
        parts = Parts(self.template, self.names, self._s3, self.echo)
        sqs = aws.client("sqs")
        self.events = EventSources(parts, sqs=sqs, visibility_timeout=settings.visibility_timeout)
        self.emr = LocalEmr(parts, emr=aws.client("emr-serverless"), log_dir=self.log_dir)
        self.gc = LocalWorkflow(parts, aws=aws)

    @property
    def queues(self) -> dict[str, Queue]:
        return self.events.queues

    @property
    def emr_applications(self) -> dict[str, dict[str, str]]:
        return self.emr.applications

    @property
    def job_runs(self) -> list[JobRun]:
        return self.emr.job_runs

    @property
    def gc_runs(self) -> list[GcRun]:
        return self.gc.runs

    @property
    def state_machine(self) -> LocalStateMachine | None:
        return self.gc.state_machine

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
        with contextlib.suppress(Exception):
            self.gc.close()
        self.emr.stop_spark()
        if self._routed:
            ROUTER.uninstall()
            self._routed = False
        self.emr.restore_moto()
        if self._owns_aws:
            self.aws.stop()

    # ------------------------------------------------------------------ creation
    def _create(self) -> None:
        ROUTER.install(self._gc_sink)
        self._routed = True
        self.emr.patch_moto()
        self._create_buckets()
        self._create_glue_databases()
        self.events.create_queues()
        self.emr.create_applications()
        self.functions, skipped = functions_from_template(
            self.template,
            names=self.names,
            env_overrides={**self._renamed_env, **self.settings.env_overrides},
            base_env=self._base_env,
            log_dir=self.log_dir,
            code_root=self.settings.code_root,
        )
        self.skipped.update(skipped)
        self.events.wire(self.functions, self.buckets)
        self.skipped.update(self.events.skipped)
        self._deploy_artifacts()
        self.gc.create(self.functions, base_env=self._base_env, code_root=self.settings.code_root)
        self._resolve_outputs()
        for lid, r in self.template.resources.items():
            if lid not in self.template.physical and lid not in self.skipped:
                self.skipped[lid] = str(r.get("Type"))
        if self.settings.gc_interval:
            self._next_gc = time.monotonic() + self.settings.gc_interval

    def _create_buckets(self) -> None:
        for lid, props in self.template.of_type("AWS::S3::Bucket").items():
            name = props.get("BucketName") or self.names.of(lid, 63, lower=True)
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

    def _create_glue_databases(self) -> None:
        """``AWS::Glue::Database``: a moto Glue database of the declared name (the Iceberg
        view's Glue table is created in it by the function that registers the view). With a
        name suffix (runtimes sharing one moto) the name gets it too, and the functions'
        ``LETHE_GLUE_DATABASE`` follows."""
        glue = None
        for lid, props in self.template.of_type("AWS::Glue::Database").items():
            spec = props.get("DatabaseInput") or {}
            declared = spec.get("Name")
            name = declared or self.names.of(lid, 255, lower=True)
            if declared and self.suffix:
                name = f"{declared}_{self.suffix}".lower()
                self._renamed_env["LETHE_GLUE_DATABASE"] = name
            glue = glue or self.aws.client("glue")
            db = {
                "Name": name,
                **({"Description": spec["Description"]} if "Description" in spec else {}),
            }
            glue.create_database(DatabaseInput=db)
            self.template.physical[lid] = Physical(name, {})

    def _deploy_artifacts(self) -> None:
        """``Custom::CDKBucketDeployment`` of ``spark_jobs/``: upload the local entry points."""
        for lid, props in self.template.of_type("Custom::CDKBucketDeployment").items():
            bucket = lid_of(props.get("DestinationBucketName"))
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

    def queue(self, key: str) -> Queue:
        """A queue by logical id, name, URL, or stack output name (``"DeleteQueueUrl"``)."""
        return self.events.queue(self.outputs.get(key, key))

    @property
    def table_uri(self) -> str:
        return self.outputs["TableUri"]

    @property
    def bucket(self) -> str:
        return self.outputs["TableBucketName"]

    @property
    def incoming_prefix(self) -> str:
        sources = self.events.s3_sources
        return sources[0].prefix if sources else "incoming/"

    def queue_depth(self, key: str) -> dict[str, int]:
        """Approximate visible / in-flight / delayed message counts of a queue."""
        return self.events.depth(self.queue(key))

    def peek(self, key: str, *, max_messages: int = 10) -> list[dict[str, Any]]:
        """Read messages of a queue (a DLQ, say) without consuming them: received, then made
        visible again at once."""
        return self.events.peek(self.queue(key), max_messages=max_messages)

    def describe(self) -> list[str]:
        """Human-readable lines: what was created and how it maps."""
        lines = [f"moto on {self.aws.endpoint} (account {ACCOUNT}, {REGION})"]
        for lid, name in self.buckets.items():
            lines.append(f"bucket   {name:<44} {lid}")
        lines += self.events.describe()
        for app in self.emr_applications.values():
            lines.append(
                f"emr      application {app['id']} ({app['release_label']} in the template; "
                "job runs executed here with local Spark)"
            )
        if self.state_machine is not None:
            lines.append(f"sfn      {self.state_machine.arn} (moto's interpreter)")
        if self.gc.schedule_expression:
            timer = (
                f"every {self.settings.gc_interval:g}s"
                if self.settings.gc_interval
                else "on demand (run_gc)"
            )
            lines.append(f"schedule {self.gc.schedule_expression} in the template; locally {timer}")
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
        for n in self.events.s3_sources:
            if wanted is None or n.function in wanted:
                done += self.events.pump_s3(n)
        if wanted is None:
            done += self.emr.pump()
        for s in self.events.sqs_sources:
            if wanted is None or s.function in wanted:
                done += self.events.pump_sqs(s)
        self.events.watch_dead_letters()
        if wanted is None and self._next_gc is not None and time.monotonic() >= self._next_gc:
            assert self.settings.gc_interval is not None
            self._next_gc = time.monotonic() + self.settings.gc_interval
            if self.table_exists():
                self.run_gc(**{**self.gc.schedule_input, **self.settings.gc_input})
                done += 1
            else:  # the stack's table is made by its first user: nothing to collect yet
                self.echo(f"GC timer: no table at {self.table_uri} yet; skipped")
        return done

    def table_exists(self) -> bool:
        """Whether the stack's table has been created (its head exists)."""
        from lethe.storage.store import parse_s3_uri

        bucket, prefix = parse_s3_uri(self.table_uri)
        try:
            self._s3.head_object(Bucket=bucket, Key=f"{prefix}/_latest_manifest")
        except self._s3.exceptions.ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def pump_until_idle(self, *, timeout: float = 600, poll: float = 0.2) -> PumpResult:
        """Deliver events until no queue holds a message (visible or in flight: failed
        messages are waited for until they come back, and go to their DLQ in the end) and no
        job run is waiting.

        Raises:
            LocalRunError: still busy after ``timeout`` seconds.
        """
        t0 = time.monotonic()
        outcomes = self.events.outcomes
        outcomes_before = len(outcomes)
        jobs_before = len(self.job_runs)
        dlq_before = dict(self.events.dlq_counts)
        while True:
            if self.pump() == 0:
                busy = self.events.busy()
                if not busy:
                    break
                if time.monotonic() - t0 > timeout:
                    raise LocalRunError(f"not idle after {timeout:g}s: {', '.join(busy)}")
                time.sleep(poll)
        # a message SQS moved to its DLQ on the last, empty receive is counted here too
        self.events.watch_dead_letters()
        dead = {
            self.queues[lid].name: n - dlq_before.get(lid, 0)
            for lid, n in self.events.dlq_counts.items()
            if n > dlq_before.get(lid, 0)
        }
        return PumpResult(
            tuple(outcomes[outcomes_before:]),
            tuple(self.job_runs[jobs_before:]),
            dead,
            time.monotonic() - t0,
        )

    # ------------------------------------------------------------------ GC
    def run_gc(self, **options: Any) -> GcRun:
        """Run the GC state machine once (on moto's interpreter) and read its report; the
        options (``dry_run``, ``name``, ``timeout``, the Plan step's input) are those of
        :meth:`LocalWorkflow.run`."""
        return self.gc.run(**options)

    # ------------------------------------------------------------------ serve
    def run_forever(self, *, poll: float = 0.5) -> None:
        """Deliver events until interrupted (Ctrl-C / SIGTERM)."""
        stop = threading.Event()

        def on_term(signum: int, frame: FrameType | None) -> None:
            stop.set()

        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, on_term)
        outcomes = self.events.outcomes
        try:
            while not stop.is_set():
                if self.pump() == 0:
                    stop.wait(poll)
                if len(outcomes) > 2000:  # serving for hours: keep the recent ones
                    del outcomes[:-1000]
        except KeyboardInterrupt:
            pass
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)


# --- command line ------------------------------------------------------------------------------------
def _parse_context(pairs: Sequence[str]) -> dict[str, object]:
    from infra.config import ConfigError, parse_context

    try:
        return parse_context(pairs)  # type: ignore[no-any-return]
    except ConfigError as e:
        raise SystemExit(str(e)) from None


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

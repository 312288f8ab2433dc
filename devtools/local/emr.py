"""EMR Serverless, locally: the template's applications created in moto, and every job run a
handler starts executed here.

moto records ``StartJobRun`` and runs nothing. :meth:`LocalEmr.pump` lists each application's
runs and executes every new one: it checks that the entry point object exists
(``s3://<artifacts>/spark_jobs/<name>.py``), then calls the local
``spark_jobs/<name>.main(entryPointArguments)``, as spark-submit would run the script, on one
local SparkSession shared by all runs, and writes the state it reaches (RUNNING, then
SUCCESS or FAILED) back to moto. A job's stdout goes to ``job-<id>.log``, the JVM's output
to ``emr-serverless-spark.log``.
"""

from __future__ import annotations

import contextlib
import importlib
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from devtools.local.common import ACCOUNT, REGION, SPARK_JOBS, LocalRunError
from devtools.local.output import ROUTER, Sink, SinkStream, fd_redirect
from devtools.local.template import Parts, Physical

__all__ = ["MOTO_EMR_RELEASE_LABEL", "JobRun", "LocalEmr"]

# moto 5.2 accepts only ``emr-N.N.0`` labels; the template's own is kept in applications.
MOTO_EMR_RELEASE_LABEL = "emr-7.0.0"


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


class LocalEmr:
    """The template's EMR Serverless applications in moto, and their job runs executed here.

    Attributes:
        applications: logical id -> ``id``, ``name``, the template's ``release_label`` and
            ``architecture``.
        job_runs: the runs executed, in order.
    """

    def __init__(self, parts: Parts, *, emr: Any, log_dir: Path) -> None:
        self.template, self.names, self.echo = parts.template, parts.names, parts.echo
        self.applications: dict[str, dict[str, str]] = {}
        self.job_runs: list[JobRun] = []
        self._jobs_seen: set[str] = set()
        self._spark_sink = Sink(log_dir / "emr-serverless-spark.log")
        self._log_dir = log_dir
        self._moto_patches: list[tuple[Any, str, Any]] = []
        self._own_spark: Any = None
        self._emr = emr
        self._s3 = parts.s3

    def patch_moto(self) -> None:
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

    def restore_moto(self) -> None:
        """Undo :meth:`patch_moto`."""
        for obj, attr, value in reversed(self._moto_patches):
            setattr(obj, attr, value)
        self._moto_patches.clear()

    def create_applications(self) -> None:
        for lid, props in self.template.of_type("AWS::EMRServerless::Application").items():
            name = self.names.of(lid, 64)
            app = self._emr.create_application(
                name=name,
                releaseLabel=MOTO_EMR_RELEASE_LABEL,
                type=str(props.get("Type", "SPARK")),
            )
            app_id = str(app["applicationId"])
            self.applications[lid] = {
                "id": app_id,
                "name": name,
                "release_label": str(props.get("ReleaseLabel", "")),
                "architecture": str(props.get("Architecture", "")),
            }
            self.template.physical[lid] = Physical(
                app_id, {"ApplicationId": app_id, "Arn": str(app["arn"])}
            )

    def pump(self) -> int:
        ran = 0
        for app in self.applications.values():
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
                self.run_job(app["id"], str(r["id"]))
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

    def run_job(self, app_id: str, run_id: str) -> JobRun:
        d = self._emr.get_job_run(applicationId=app_id, jobRunId=run_id)["jobRun"]
        driver = (d.get("jobDriver") or {}).get("sparkSubmit") or {}
        entry = str(driver.get("entryPoint", ""))
        args = [str(a) for a in driver.get("entryPointArguments", [])]
        job = JobRun(app_id, run_id, str(d.get("name", "")), entry, args)
        self.job_runs.append(job)
        self._set_job_state(app_id, run_id, "RUNNING")
        t0 = time.perf_counter()
        out = Sink(self._log_dir / f"job-{run_id}.log")
        try:
            module = self._job_module(entry)
            with (
                fd_redirect(self._spark_sink.path),
                self._shared_spark(),
                ROUTER.capture(out),
                contextlib.redirect_stderr(SinkStream(out)),
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

    def stop_spark(self) -> None:
        session, self._own_spark = self._own_spark, None
        if session is None:
            return
        try:
            with fd_redirect(self._spark_sink.path):
                session.stop()
        except Exception:  # pragma: no cover - best effort at shutdown
            pass

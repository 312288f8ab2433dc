"""The GC workflow in the local runtime: the template's state machine on moto's interpreter
(:mod:`devtools.local.stepfunctions`), the EventBridge schedule read from the template (its
expression and input; the runtime's timer stands in for it), and one run with its report.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devtools.local.common import LocalRunError
from devtools.local.functions import LocalFunction, environment
from devtools.local.server import LocalAws
from devtools.local.stepfunctions import ExecutionResult, LocalStateMachine
from devtools.local.template import Parts, Physical, lid_of
from lethe.gc.models import GcReport

__all__ = ["GcRun", "LocalWorkflow"]


@dataclass(frozen=True, slots=True)
class GcRun:
    """A GC workflow execution and, when it got that far, the run's report."""

    execution: ExecutionResult
    report: GcReport | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.execution.ok


class LocalWorkflow:
    """The template's one state machine (if any) and its schedule.

    Attributes:
        state_machine: the state machine on moto's interpreter, None without one.
        schedule_expression: the rule's ``ScheduleExpression`` (not applied locally).
        schedule_input: the rule's input for timer runs.
        runs: the executions, in order.
    """

    def __init__(self, parts: Parts, *, aws: LocalAws) -> None:
        self.aws = aws
        self.template, self.echo = parts.template, parts.echo
        self.state_machine: LocalStateMachine | None = None
        self.schedule_expression: str | None = None
        self.schedule_input: dict[str, Any] = {"dry_run": False}
        self.runs: list[GcRun] = []
        self._s3 = parts.s3

    def create(
        self,
        functions: Mapping[str, LocalFunction],
        *,
        base_env: Mapping[str, str],
        code_root: Path,
    ) -> None:
        """Create the state machine (its functions share one environment: the variables of
        the functions its definition references) and read the schedule."""
        machines = self.template.of_type("AWS::StepFunctions::StateMachine")
        if len(machines) > 1:
            raise LocalRunError("the local runtime runs one state machine; found several")
        for lid, props in machines.items():
            env = _shared_environment(functions, json.dumps(props.get("DefinitionString")))
            with environment({**base_env, "MOTO_PORT": str(self.aws.port)}):
                self.state_machine = LocalStateMachine.from_template(
                    self.template.template,
                    aws=self.aws,
                    environment=env,
                    code_root=code_root,
                )
            arn = self.state_machine.arn
            self.template.physical[lid] = Physical(
                arn, {"Name": arn.rsplit(":", 1)[-1], "Arn": arn}
            )
        self._read_schedule()

    def _read_schedule(self) -> None:
        for lid, props in self.template.of_type("AWS::Events::Rule").items():
            for target in props.get("Targets", []):
                if lid_of(target.get("Arn")) in self.template.of_type(
                    "AWS::StepFunctions::StateMachine"
                ):
                    self.schedule_expression = props.get("ScheduleExpression")
                    raw = target.get("Input")
                    if raw:
                        self.schedule_input = json.loads(raw)
                    self.template.physical[lid] = Physical(f"local-timer-{lid}")

    def close(self) -> None:
        """Remove the state machine's Lambda routing."""
        machine, self.state_machine = self.state_machine, None
        if machine is not None:
            machine.close()

    def run(
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
            report = self._report(execution.output)
        run = GcRun(execution, report, time.perf_counter() - t0)
        self.runs.append(run)
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

    def _report(self, output: Mapping[str, Any]) -> GcReport | None:
        from lethe.storage.store import parse_s3_uri

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


def _shared_environment(functions: Mapping[str, LocalFunction], definition: str) -> dict[str, str]:
    """The one environment of the functions ``definition`` references (they must agree)."""
    env: dict[str, str] = {}
    for f in sorted(f for f in functions if f in definition):
        for k, v in functions[f].environment.items():
            if env.get(k, v) != v:
                raise LocalRunError(
                    f"GC functions disagree on {k}; the local runner shares one environment"
                )
            env[k] = v
    return env

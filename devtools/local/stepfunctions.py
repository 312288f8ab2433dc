"""Run a synthesized Step Functions state machine locally, on moto's ASL interpreter.

The definition is the one the CDK app synthesizes (:func:`synthesize_template` builds the
app in-process and takes the ``AWS::StepFunctions::StateMachine``'s ``DefinitionString``),
so the states, paths, Map, Retry and Catch that run are the deployed ones. moto executes it
(``execute_state_machine``) against its own Lambda service; each Lambda function the
definition names is created in moto (any zip: only its ARN matters) and its invocations are
routed to our Python handler, loaded from the Lambda code root as a *separate module per
function* under that function's own environment (one cold start each, like Lambda), with
``os.environ`` swapped under a lock for the duration of each invocation so no function sees
another's settings.

The routing replaces ``moto.awslambda.models.LambdaFunction._invoke_lambda(self, event) ->
(payload, errored, logs)``, a private moto 5.2 internal (moto runs handlers in Docker
otherwise): :func:`check_moto_hook` fails loudly if it moves. It only works when moto's
server runs as a thread of this process (:func:`devtools.local.server.start_moto`); the
interpreter calls Lambda at ``localhost:$MOTO_PORT``.

What the interpreter cannot do, and how it is handled:

* Lambda *service* errors (``Lambda.TooManyRequestsException`` …) never arise locally:
  :meth:`LocalStateMachine.inject_failure` makes the next invocation(s) of a function fail
  with a given error name, which the interpreter matches against Retry/Catch exactly as it
  would the service's (the retry interval is really waited).
* A Task's ``TimeoutSeconds`` (and so a ``States.Timeout`` retry) is not exercised: an
  in-process handler cannot be interrupted, and the local handlers finish in seconds.
* Map ``MaxConcurrency`` is not observable: the environment lock serializes our handlers'
  invocations (their S3 requests still go to moto concurrently with the interpreter).
* Only ``Fn::Join``, ``Fn::GetAtt <function>.Arn`` and ``Ref <function>`` are resolved in
  the definition; anything else fails with :class:`LocalRunError` naming it.

Example:
    >>> from devtools.local.server import start_moto                            # doctest: +SKIP
    >>> aws = start_moto()                                                  # doctest: +SKIP
    >>> template = synthesize_template()                                    # doctest: +SKIP
    >>> with LocalStateMachine.from_template(template, aws=aws,             # doctest: +SKIP
    ...         environment={"LETHE_TABLE_URI": "s3://b/t"}) as sm:
    ...     run = sm.run({"dry_run": False}, name="gc-1")
    >>> run.status, run.states                                              # doctest: +SKIP
    ('SUCCEEDED', ['Plan', 'SweepBatches', 'Sweep', 'Compact', 'Expire', ...])
"""

from __future__ import annotations

import importlib.util
import inspect
import io
import json
import os
import sys
import tempfile
import threading
import time
import traceback
import uuid
import zipfile
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from devtools.local.events import LambdaContext
from devtools.local.server import LocalAws

__all__ = [
    "ExecutionResult",
    "LocalLambdas",
    "LocalRunError",
    "LocalStateMachine",
    "check_moto_hook",
    "environment",
    "load_handler",
    "resolve_definition",
    "state_machine_definition",
    "synthesize_template",
]

ROOT = Path(__file__).resolve().parents[2]
CODE_ROOT = ROOT / "functions"
Handler = Callable[[Any, Any], Any]

_ENV_LOCK = threading.RLock()


class LocalRunError(RuntimeError):
    """The local runner cannot do what was asked (unresolvable template, moto changed, …)."""


# --- environment and handler loading -------------------------------------------------------
@contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """Run with ``os.environ`` set to exactly ``env`` (under a process-wide lock), then
    restore it. Threads that only *read* the environment see ``env`` meanwhile: pass a
    superset of what they need (the runner passes the process environment plus the
    function's variables)."""
    with _ENV_LOCK:
        saved = dict(os.environ)
        try:
            os.environ.clear()
            os.environ.update(env)
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)


def load_handler(
    handler: str, *, code_root: Path = CODE_ROOT, module_name: str | None = None
) -> Handler:
    """Load ``"pkg.module.function"`` from ``code_root`` as a fresh module (its own globals,
    settings read now, in the caller's environment) and return the function.

    Loading by file path sidesteps module names that Lambda itself would resolve differently
    (see :func:`lambda_importable`).
    """
    mod_path, _, attr = handler.rpartition(".")
    if not mod_path or not attr:
        raise LocalRunError(f"handler {handler!r} is not 'module.function'")
    parts = mod_path.split(".")
    file = code_root.joinpath(*parts).with_suffix(".py")
    if not file.is_file():
        raise LocalRunError(f"handler {handler!r}: {file} does not exist")
    name = module_name or f"_lethe_local_{'_'.join(parts)}_{uuid.uuid4().hex[:8]}"
    if str(code_root) not in sys.path:  # as in Lambda, the code root is importable
        sys.path.append(str(code_root))  # (handlers import functions/_settings.py)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise LocalRunError(f"cannot load {file}")
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise LocalRunError(f"handler {handler!r}: {file} has no function {attr!r}")
    return fn  # type: ignore[no-any-return]


def lambda_importable(handler: str, *, code_root: Path = CODE_ROOT) -> str | None:
    """How the Lambda Python runtime would import ``handler`` (``importlib.import_module``
    with the code root first on ``sys.path``), in a clean interpreter. Returns None if it
    works, else the error (e.g. a package named like a built-in module, such as ``gc``)."""
    import subprocess

    mod_path = handler.rpartition(".")[0]
    code = (  # os._exit: pyarrow may abort a finished interpreter's teardown (lethe.process)
        "import importlib, os, sys; sys.path.insert(0, sys.argv[1]); "
        "importlib.import_module(sys.argv[2]); print('importable', flush=True); os._exit(0)"
    )
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true", "PYTHONPATH": ""}
    shared = str(ROOT / "shared")
    env["PYTHONPATH"] = shared
    r = subprocess.run(
        [sys.executable, "-c", code, str(code_root), mod_path],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    if r.returncode == 0 and r.stdout.strip().endswith("importable"):
        return None
    return (r.stderr.strip().splitlines() or ["failed"])[-1]


# --- moto's Lambda hook --------------------------------------------------------------------
def check_moto_hook() -> None:
    """Fail loudly unless moto still invokes functions through
    ``LambdaFunction._invoke_lambda(self, event) -> (payload, errored, logs)``."""
    import moto
    from moto.awslambda.models import LambdaFunction

    if not moto.__version__.startswith("5.2."):
        raise LocalRunError(
            f"the local runner hooks moto 5.2.x internals; found {moto.__version__}"
        )
    target = getattr(LambdaFunction, "_invoke_lambda", None)
    if target is _dispatch:  # already hooked by us: check what we wrapped
        target = _MOTO_INVOKE
    if target is None:
        raise LocalRunError("moto's LambdaFunction._invoke_lambda is gone: update the hook")
    params = list(inspect.signature(target).parameters)
    if params[:2] != ["self", "event"]:
        raise LocalRunError(f"moto's LambdaFunction._invoke_lambda{params} changed signature")
    src = inspect.getsource(LambdaFunction.invoke)
    if "self._invoke_lambda(event=" not in src or "errored" not in src:
        raise LocalRunError("moto's LambdaFunction.invoke no longer calls _invoke_lambda")


@dataclass
class _Route:
    name: str
    handler: str
    env: dict[str, str]
    code_root: Path
    fn: Handler | None = None
    faults: deque[tuple[str, str]] = field(default_factory=deque)
    invocations: int = 0


# One process-wide hook, installed once: every LocalLambdas registers its function ARNs in
# it, so several local state machines (or runtimes) can coexist and close in any order.
_HOOK_LOCK = threading.Lock()
_HOOKED: dict[str, tuple[LocalLambdas, _Route]] = {}
_MOTO_INVOKE: Any = None


def _dispatch(fn_self: Any, event: Any = None) -> tuple[str, bool, str]:
    entry = _HOOKED.get(getattr(fn_self, "function_arn", ""))
    if entry is None:
        return _MOTO_INVOKE(fn_self, event)  # type: ignore[no-any-return]
    owner, route = entry
    return owner._invoke(route, event)


class LocalLambdas:
    """Routes moto's invocations of registered function ARNs to in-process handlers;
    any other function keeps moto's own behaviour."""

    def __init__(self) -> None:
        self._routes: dict[str, _Route] = {}
        self._installed = False

    def register(
        self,
        arn: str,
        *,
        name: str,
        handler: str,
        env: Mapping[str, str],
        code_root: Path = CODE_ROOT,
        fn: Handler | None = None,
    ) -> None:
        route = _Route(name, handler, dict(env), code_root, fn)
        self._routes[arn] = route
        if self._installed:
            with _HOOK_LOCK:
                _HOOKED[arn] = (self, route)

    def route(self, arn: str) -> _Route:
        return self._routes[arn]

    def install(self) -> None:
        """Start routing this instance's functions (hooks moto on first use)."""
        global _MOTO_INVOKE
        check_moto_hook()
        from moto.awslambda.models import LambdaFunction

        with _HOOK_LOCK:
            if _MOTO_INVOKE is None:
                _MOTO_INVOKE = LambdaFunction._invoke_lambda
                setattr(LambdaFunction, "_invoke_lambda", _dispatch)  # noqa: B010
            for arn, route in self._routes.items():
                _HOOKED[arn] = (self, route)
            self._installed = True

    def uninstall(self) -> None:
        """Stop routing this instance's functions; unhook moto when no instance routes any."""
        global _MOTO_INVOKE
        from moto.awslambda.models import LambdaFunction

        with _HOOK_LOCK:
            for arn in self._routes:
                if _HOOKED.get(arn, (None,))[0] is self:
                    del _HOOKED[arn]
            self._installed = False
            if (
                not _HOOKED
                and _MOTO_INVOKE is not None
                and LambdaFunction.__dict__.get("_invoke_lambda") is _dispatch
            ):
                setattr(LambdaFunction, "_invoke_lambda", _MOTO_INVOKE)  # noqa: B010
                _MOTO_INVOKE = None

    def _invoke(self, route: _Route, event: Any) -> tuple[str, bool, str]:
        route.invocations += 1
        if route.faults:
            error, message = route.faults.popleft()
            return json.dumps({"errorType": error, "errorMessage": message}), True, ""
        arn = next(a for a, r in self._routes.items() if r is route)
        context = LambdaContext(
            function_name=route.name,
            invoked_function_arn=arn,
            log_group_name=f"/aws/lambda/{route.name}",
        )
        with environment(route.env):
            try:
                if route.fn is None:  # cold start, in the function's own environment
                    route.fn = load_handler(route.handler, code_root=route.code_root)
                result = route.fn(event if event is not None else {}, context)
                return json.dumps(result), False, ""
            except Exception as e:  # what Lambda reports for an unhandled exception
                payload = {
                    "errorType": type(e).__name__,
                    "errorMessage": str(e),
                    "stackTrace": traceback.format_tb(e.__traceback__),
                }
                return json.dumps(payload), True, ""


# --- the template --------------------------------------------------------------------------
def synthesize_template(
    context: Mapping[str, object] | None = None, *, build_layers: bool = True
) -> dict[str, Any]:
    """Synthesize the CDK app in-process (no cdk-nag) and return the stack's template.

    The stack needs the Lambda layer zips as assets: ``build_layers`` brings them up to date
    first (``layers.build.build()``, a no-op when current).
    """
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    import aws_cdk.assertions as assertions

    from infra.app import build_app
    from layers.build import build

    if build_layers:
        build()
    with tempfile.TemporaryDirectory(prefix="lethe-cdk-") as out:
        _, stack = build_app(context=dict(context or {}), outdir=out, nag=False)
        template: dict[str, Any] = dict(assertions.Template.from_stack(stack).to_json())
    return template


def state_machine_definition(template: Mapping[str, Any]) -> tuple[str, Any]:
    """``(logical id, DefinitionString)`` of the template's only state machine."""
    found: list[tuple[str, Any]] = [
        (lid, r["Properties"]["DefinitionString"])
        for lid, r in template.get("Resources", {}).items()
        if r.get("Type") == "AWS::StepFunctions::StateMachine"
    ]
    if len(found) != 1:
        raise LocalRunError(f"expected one AWS::StepFunctions::StateMachine, found {len(found)}")
    return found[0]


def resolve_definition(value: Any, arns: Mapping[str, str], names: Mapping[str, str]) -> Any:
    """Resolve ``Fn::Join``, ``Fn::GetAtt [id, Arn]`` and ``Ref`` against local resources
    (function ARNs and names by logical id); any other intrinsic is an error."""
    if isinstance(value, list):
        return [resolve_definition(v, arns, names) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Fn::Join":
            sep, parts = arg
            return str(sep).join(str(resolve_definition(p, arns, names)) for p in parts)
        if key == "Fn::GetAtt":
            lid, attr = arg
            if attr == "Arn" and lid in arns:
                return arns[lid]
            raise LocalRunError(f"cannot resolve Fn::GetAtt {lid}.{attr} locally")
        if key == "Ref":
            if arg in names:
                return names[arg]
            raise LocalRunError(f"cannot resolve Ref {arg} locally")
        if key.startswith("Fn::"):
            raise LocalRunError(f"intrinsic {key} is not supported by the local runner")
    return {k: resolve_definition(v, arns, names) for k, v in value.items()}


def _referenced_functions(value: Any, out: set[str]) -> set[str]:
    if isinstance(value, dict):
        if set(value) == {"Fn::GetAtt"}:
            out.add(value["Fn::GetAtt"][0])
        for v in value.values():
            _referenced_functions(v, out)
    elif isinstance(value, list):
        for v in value:
            _referenced_functions(v, out)
    return out


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("index.py", "def handler(event, context):\n    return event\n")
    return buf.getvalue()


# --- the state machine ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """A finished local execution: status, output or error, and the states entered."""

    name: str
    arn: str
    status: str
    output: Any
    error: str | None
    cause: str | None
    states: tuple[str, ...]
    history: tuple[dict[str, Any], ...]

    @property
    def ok(self) -> bool:
        return self.status == "SUCCEEDED"


class LocalStateMachine:
    """A template's state machine, created in moto with its functions routed locally."""

    def __init__(
        self,
        aws: LocalAws,
        definition: str,
        lambdas: LocalLambdas,
        arns: Mapping[str, str],
        handlers: Mapping[str, str],
    ) -> None:
        self.aws = aws
        self.definition = definition
        self.lambdas = lambdas
        self.arns = dict(arns)  # logical id -> ARN
        self.handlers = dict(handlers)  # logical id -> handler string
        self._sfn = aws.client("stepfunctions")
        self._saved_config: dict[str, Any] | None = None
        self._set_execute(True)
        role = self._role()
        self.arn: str = self._sfn.create_state_machine(
            name=f"lethe-local-{uuid.uuid4().hex[:8]}", definition=definition, roleArn=role
        )["stateMachineArn"]

    @classmethod
    def from_template(
        cls,
        template: Mapping[str, Any],
        *,
        aws: LocalAws,
        environment: Mapping[str, str] | None = None,
        code_root: Path = CODE_ROOT,
        handlers: Mapping[str, Handler] | None = None,
    ) -> LocalStateMachine:
        """Create the template's state machine and its Lambda functions in moto.

        Args:
            template: a synthesized CloudFormation template (see :func:`synthesize_template`).
            aws: moto's server, running in this process.
            environment: values for function environment variables, overriding the
                template's; a template value that is not a plain string (a ``Ref`` to a
                bucket…) must be given here.
            code_root: the Lambda code root the handler strings are relative to.
            handlers: optional handler string -> callable, instead of loading the module.
        """
        lid, raw = state_machine_definition(template)
        resources = template["Resources"]
        fn_ids = sorted(
            i
            for i in _referenced_functions(raw, set())
            if resources.get(i, {}).get("Type") == "AWS::Lambda::Function"
        )
        if not fn_ids:
            raise LocalRunError(f"state machine {lid} invokes no Lambda function")
        lam = aws.client("lambda")
        role = _ensure_role(aws)
        base = {
            **os.environ,
            "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon locally
        }
        lambdas = LocalLambdas()
        arns: dict[str, str] = {}
        names: dict[str, str] = {}
        handler_of: dict[str, str] = {}
        overrides = dict(environment or {})
        suffix = uuid.uuid4().hex[:6]
        for fid in fn_ids:
            props = resources[fid]["Properties"]
            handler = str(props["Handler"])
            name = f"{fid[:50]}-{suffix}"
            env: dict[str, str] = dict(base)
            unresolved = []
            for k, v in (props.get("Environment") or {}).get("Variables", {}).items():
                if k in overrides:
                    env[k] = overrides[k]
                elif isinstance(v, str):
                    env[k] = v
                else:
                    unresolved.append(k)
            if unresolved:
                raise LocalRunError(
                    f"function {fid}: give values for {sorted(unresolved)} in environment= "
                    "(their template values reference deployed resources)"
                )
            env.update({k: v for k, v in overrides.items() if k not in env})
            env["AWS_LAMBDA_FUNCTION_NAME"] = name
            arn = lam.create_function(
                FunctionName=name,
                Runtime=str(props.get("Runtime", "python3.12")),
                Role=role,
                Handler=handler,
                Code={"ZipFile": _zip()},
                Timeout=int(props.get("Timeout", 3)),
                MemorySize=int(props.get("MemorySize", 128)),
            )["FunctionArn"]
            arns[fid], names[fid], handler_of[fid] = arn, name, handler
            lambdas.register(
                arn,
                name=name,
                handler=handler,
                env=env,
                code_root=code_root,
                fn=(handlers or {}).get(handler),
            )
        definition = resolve_definition(raw, arns, names)
        json.loads(definition)  # a resolved definition is plain JSON
        lambdas.install()
        try:
            return cls(aws, definition, lambdas, arns, handler_of)
        except BaseException:
            lambdas.uninstall()
            raise

    def _role(self) -> str:
        return _ensure_role(self.aws)

    def _config(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        import urllib.request

        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.aws.endpoint}/moto-api/config",
            data=data,
            method="POST" if body is not None else "GET",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            out: dict[str, Any] = json.loads(r.read())
        return out

    def _set_execute(self, on: bool) -> None:
        if on and self._saved_config is None:
            self._saved_config = dict(self._config().get("stepfunctions", {}))
        elif not on and self._saved_config is not None:
            self._config({"stepfunctions": self._saved_config})
            self._saved_config = None
            return
        if on:
            self._config({"stepfunctions": {"execute_state_machine": True}})

    def function_arn(self, handler: str) -> str:
        """The ARN of the function whose handler string is ``handler``."""
        for lid, h in self.handlers.items():
            if h == handler:
                return self.arns[lid]
        raise LocalRunError(f"no function with handler {handler!r}")

    def invocations(self, handler: str) -> int:
        return self.lambdas.route(self.function_arn(handler)).invocations

    def inject_failure(
        self, handler: str, error: str, message: str = "", *, times: int = 1
    ) -> None:
        """Make the next ``times`` invocations of ``handler``'s function fail with ``error``
        (e.g. ``Lambda.TooManyRequestsException``) without running it."""
        route = self.lambdas.route(self.function_arn(handler))
        for _ in range(times):
            route.faults.append((error, message or f"injected {error}"))

    def run(
        self, input: Mapping[str, Any], *, name: str, timeout: float = 300, poll: float = 0.1
    ) -> ExecutionResult:
        """Start an execution named ``name`` and wait for it to finish."""
        arn = self._sfn.start_execution(
            stateMachineArn=self.arn, name=name, input=json.dumps(dict(input))
        )["executionArn"]
        deadline = time.monotonic() + timeout
        while True:
            d = self._sfn.describe_execution(executionArn=arn)
            if d["status"] != "RUNNING":
                break
            if time.monotonic() > deadline:
                self._sfn.stop_execution(executionArn=arn, error="LocalTimeout")
                raise LocalRunError(f"execution {name} still running after {timeout}s")
            time.sleep(poll)
        events: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kw: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
            if token:
                kw["nextToken"] = token
            h = self._sfn.get_execution_history(**kw)
            events.extend(h["events"])
            token = h.get("nextToken")
            if not token:
                break
        states = tuple(
            e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e
        )
        output = json.loads(d["output"]) if d.get("output") else None
        return ExecutionResult(
            name=name,
            arn=arn,
            status=str(d["status"]),
            output=output,
            error=d.get("error"),
            cause=d.get("cause"),
            states=states,
            history=tuple(events),
        )

    def close(self) -> None:
        self.lambdas.uninstall()
        self._set_execute(False)

    def __enter__(self) -> LocalStateMachine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ensure_role(aws: LocalAws) -> str:
    iam = aws.client("iam")
    name = "lethe-local-execution"
    try:
        return str(iam.get_role(RoleName=name)["Role"]["Arn"])
    except iam.exceptions.NoSuchEntityException:
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        return str(
            iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"][
                "Arn"
            ]
        )


def states_of(definition: str) -> Sequence[str]:
    """Top-level and nested state names of an ASL definition (for coverage assertions)."""
    out: list[str] = []

    def walk(d: Mapping[str, Any]) -> None:
        for n, s in d.get("States", {}).items():
            out.append(n)
            for key in ("ItemProcessor", "Iterator"):
                if key in s:
                    walk(s[key])
            for b in s.get("Branches", []):
                walk(b)

    walk(json.loads(definition))
    return out

"""In-process Lambda functions: a template's ``AWS::Lambda::Function`` run on this
interpreter, each from a module object of its own, in an environment of its own.

:func:`load_handler` loads ``module.function`` from the Lambda code root (``functions/``) as
a fresh module (its settings read at its own cold start); :func:`environment` sets
``os.environ`` to exactly one function's environment under a process-wide lock for the
duration of an invocation; :class:`LocalFunction` combines them with the routing of its
output (:mod:`devtools.local.output`); :func:`functions_from_template` makes one per template
function whose code is ours. moto's interpreter invokes the GC functions through the same two
helpers (:mod:`devtools.local.stepfunctions`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from devtools.local.common import ACCOUNT, CODE_ROOT, REGION, ROOT, LocalRunError, Names
from devtools.local.events import LambdaContext
from devtools.local.output import ROUTER, Sink
from devtools.local.template import Physical, StackTemplate, lid_of

__all__ = [
    "Handler",
    "Invocation",
    "LocalFunction",
    "environment",
    "function_lid",
    "functions_from_template",
    "handler_file",
    "lambda_importable",
    "load_handler",
]

Handler = Callable[[Any, Any], Any]

_ENV_LOCK = threading.RLock()


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


def handler_file(handler: str, code_root: Path = CODE_ROOT) -> Path | None:
    """The file of ``module.function`` under the code root, if it exists."""
    mod = handler.rpartition(".")[0]
    f = code_root.joinpath(*mod.split(".")).with_suffix(".py") if mod else None
    return f if f is not None and f.is_file() else None


@dataclass(frozen=True, slots=True)
class Invocation:
    """One invocation: ``ok`` (no unhandled exception), its JSON result or error, duration;
    ``started``/``ended`` (``time.monotonic()``) and the execution environment it ran in
    (``environment``: 0, 1, ... when the runtime ran several at once), for the invocation log.
    """

    ok: bool
    result: Any
    error: str | None
    seconds: float
    started: float = 0.0
    ended: float = 0.0
    environment: int = 0


class LocalFunction:
    """A template ``AWS::Lambda::Function`` run in-process.

    Like Lambda, it runs concurrent invocations (:meth:`invoke_many`) in separate execution
    environments: each has its own module object of the handler (its own cold start, its
    own module-level state), all in the function's one environment of variables.

    Attributes:
        logical_id, name, arn, handler: as in the template (name and ARN local).
        environment: the function's variables, resolved to local resources.
        timeout: the template's timeout in seconds (reported when exceeded, not enforced).
        invocations, failures: counters.
        log: every invocation, in the order they ended (start and end times included).
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
        self.log: list[Invocation] = []
        self._fns: dict[int, Callable[[Any, Any], Any]] = {}  # execution environment -> handler
        self._lock = threading.Lock()
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
        with environment(self._env):
            return self._run(event, 0)

    def invoke_many(self, events: Sequence[Any]) -> list[Invocation]:
        """Run one invocation per event at once, each in its own execution environment
        (threads; the caller holds the function's environment of variables for all of
        them, which they only read). Returns the invocations in the order of ``events``."""
        if len(events) <= 1:
            return [self.invoke(e) for e in events]
        with environment(self._env), ThreadPoolExecutor(max_workers=len(events)) as pool:
            futures = [pool.submit(self._run, e, i) for i, e in enumerate(events)]
            return [f.result() for f in futures]

    def _handler(self, slot: int) -> Callable[[Any, Any], Any]:
        with self._lock:  # one cold start at a time (module loading is not thread-safe)
            fn = self._fns.get(slot)
            if fn is None:
                name = f"_lethe_local_{self.logical_id}_{slot}_{uuid.uuid4().hex[:6]}"
                fn = load_handler(self.handler, code_root=self.code_root, module_name=name)
                _own_metric_sets(sys.modules[name])
                self._fns[slot] = fn
            return fn

    def _run(self, event: Any, slot: int) -> Invocation:
        payload = json.loads(json.dumps(event))
        context = LambdaContext(
            function_name=self.name,
            memory_limit_in_mb=self.memory,
            invoked_function_arn=self.arn,
            log_group_name=f"/aws/lambda/{self.name}",
        )
        with self._lock:
            self.invocations += 1
        started = time.monotonic()
        t0 = time.perf_counter()
        ok, result, error = True, None, None
        with ROUTER.capture(self.sink):
            try:
                result = json.loads(json.dumps(self._handler(slot)(payload, context)))
            except Exception as e:  # what Lambda reports for an unhandled exception
                ok, error = False, f"{type(e).__name__}: {e}"
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
        inv = Invocation(
            ok, result, error, time.perf_counter() - t0, started, time.monotonic(), slot
        )
        with self._lock:
            self.failures += 0 if ok else 1
            self.log.append(inv)
        return inv


def _own_metric_sets(module: ModuleType) -> None:
    """Give the module's Powertools ``Metrics`` objects metric sets of their own.

    Powertools keeps them at class level, shared by every instance in a process: on Lambda
    each execution environment is a process of its own, here several run at once on threads
    of one process, and would flush (and clear) each other's metrics.
    """
    from aws_lambda_powertools import Metrics

    for obj in vars(module).values():
        if isinstance(obj, Metrics):
            provider: Any = obj.provider
            for attr in ("metric_set", "dimension_set", "metadata_set"):
                own: dict[str, Any] = {}
                setattr(obj, attr, own)
                setattr(provider, attr, own)


def function_lid(value: Any, functions: Mapping[str, LocalFunction]) -> str | None:
    """The logical id of the function ``value`` names: an intrinsic, a name or an ARN."""
    lid = lid_of(value)
    if lid is not None:
        return lid
    text = str(value)
    for flid, fn in functions.items():
        if text in (fn.name, fn.arn):
            return flid
    return None


def functions_from_template(
    template: StackTemplate,
    *,
    names: Names,
    env_overrides: Mapping[str, str],
    base_env: Mapping[str, str],
    log_dir: Path,
    code_root: Path = CODE_ROOT,
) -> tuple[dict[str, LocalFunction], dict[str, str]]:
    """One :class:`LocalFunction` per template function whose code is ours (``functions/``),
    its environment resolved; and why the others (CDK's own handlers) are skipped.

    Names and ARNs of every function, and of the IAM roles, are resolvable first: an
    environment may reference another function.
    """
    props_of = template.of_type("AWS::Lambda::Function")
    fn_names = {
        lid: props.get("FunctionName") or names.of(lid, 64) for lid, props in props_of.items()
    }
    for lid, name in fn_names.items():
        template.physical[lid] = Physical(
            name, {"Arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"}
        )
    for lid, r in template.of_type("AWS::IAM::Role").items():
        role = r.get("RoleName") or names.of(lid, 64)
        template.physical[lid] = Physical(
            role, {"Arn": f"arn:aws:iam::{ACCOUNT}:role/{role}", "RoleId": f"AROA{lid[:16]}"}
        )
    # Our functions share one code asset (functions/); CDK's own handlers have others.
    ours = {
        json.dumps(props.get("Code"), sort_keys=True)
        for props in props_of.values()
        if handler_file(str(props.get("Handler", "")), code_root) is not None
    }
    functions: dict[str, LocalFunction] = {}
    skipped: dict[str, str] = {}
    for lid, props in props_of.items():
        variables = (props.get("Environment") or {}).get("Variables") or {}
        env: dict[str, str] = {}
        unresolved: list[str] = []
        for k, v in variables.items():
            if k in env_overrides:
                env[k] = env_overrides[k]
                continue
            value, why = template.try_resolve(v)
            if why is not None:
                unresolved.append(f"{k}: {why}")
            else:
                env[k] = str(value)
        fn = LocalFunction(
            logical_id=lid,
            name=fn_names[lid],
            handler=str(props.get("Handler", "")),
            environment=env,
            base_env=base_env,
            timeout=int(props.get("Timeout", 3)),
            memory=int(props.get("MemorySize", 128)),
            log_dir=log_dir,
            code_root=code_root,
        )
        if json.dumps(props.get("Code"), sort_keys=True) not in ours:
            skipped[lid] = f"handler {fn.handler!r}: CDK-provided code, not functions/"
            continue
        if unresolved:
            raise LocalRunError(f"function {lid}: cannot resolve {unresolved}")
        functions[lid] = fn
    return functions, skipped

"""The stack's CloudFormation template, locally: one synthesis (cached), one reader.

:func:`load_template` returns the template: a given one, the cached synthesis of the current
``infra/`` sources, or a fresh in-process synthesis (:func:`synthesize_template`, with
placeholder layer zips: no layer build, no network). :class:`StackTemplate` reads it and
resolves ``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub``, ``Fn::Select``, ``Fn::Split``
and ``AWS::NoValue`` to local names and ARNs; the runtime and the state machine runner
(:mod:`devtools.local.stepfunctions`) both resolve through it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from devtools.local.common import (
    ACCOUNT,
    REGION,
    ROOT,
    SPARK_JOBS,
    STACK_NAME,
    LocalRunError,
    Names,
)

__all__ = [
    "Physical",
    "StackTemplate",
    "lid_of",
    "load_template",
    "synthesize_template",
]

TEMPLATE_INPUTS = ("infra", "cdk.json")
_NO_VALUE = object()


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


def synthesize_template(context: Mapping[str, object] | None = None) -> dict[str, Any]:
    """Synthesize the CDK app in-process (no cdk-nag) and return the stack's template: the
    one synthesis of the local tools (:func:`load_template` caches it; the state machine
    runner's tests call it directly).

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
    template = synthesize_template(ctx)
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


def lid_of(value: Any) -> str | None:
    """The logical id an intrinsic (``Ref``/``Fn::GetAtt``) points at, if it is one."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref":
            return str(arg)
        if key == "Fn::GetAtt":
            return str(arg.split(".", 1)[0] if isinstance(arg, str) else arg[0])
    return None


@dataclass(frozen=True, slots=True)
class Parts:
    """What the runtime's pieces (event sources, EMR, the GC workflow) work from: the stack
    template, its local names, the S3 client and the echo of what happens."""

    template: StackTemplate
    names: Names
    s3: Any
    echo: Callable[[str], None]

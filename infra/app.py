"""CDK app entry point: ``python -m infra.app`` (what ``cdk.json`` runs) synthesizes cdk.out/.

Run from the repository root; ``make synth`` builds the layers first. Pure Python: no npm
download is needed to synthesize (``npx aws-cdk`` is only needed to deploy). Run directly, the
app reads ``cdk.json``'s context itself (the CDK CLI would pass it in ``CDK_CONTEXT_JSON``)
and takes ``-c key=value`` overrides like the CLI::

    .venv/bin/python -m infra.app -c lethe:encryption=kms -c lethe:versioned=true
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra import constants as c
from infra.config import ConfigError, LetheConfig, parse_context
from infra.stack import LetheStack

ROOT = Path(__file__).resolve().parents[1]
CDK_JSON = ROOT / "cdk.json"


def cdk_json_context() -> dict[str, object]:
    """The ``context`` block of ``cdk.json`` (feature flags and Lethe defaults)."""
    context = json.loads(CDK_JSON.read_text()).get("context", {})
    assert isinstance(context, dict)
    return context


def build_app(
    *,
    context: Mapping[str, object] | None = None,
    outdir: str | None = None,
    nag: bool = True,
    spark_jobs_dir: Path | None = None,
) -> tuple[cdk.App, LetheStack]:
    """The app with its one stack, and cdk-nag's AwsSolutions checks unless ``nag=False``.

    Args:
        context: overrides, applied after cdk.json and after ``CDK_CONTEXT_JSON`` (CLI -c).
        outdir: cloud assembly directory (default: ``CDK_OUTDIR`` or ``cdk.out``).
        nag: run cdk-nag as a validation plugin: any unacknowledged finding fails
            ``app.synth()`` and is written to ``<outdir>/validation-report.json``.
        spark_jobs_dir: Spark entry points to upload (default ``spark_jobs/``).

    Raises:
        ConfigError: a context value is unusable.
    """
    app = cdk.App(
        context=cdk_json_context(),  # lowest precedence: CDK_CONTEXT_JSON overrides it
        post_cli_context=dict(context or {}),
        outdir=outdir,
    )
    config = LetheConfig.from_context(app.node.try_get_context)
    env = None
    if os.environ.get("CDK_DEFAULT_ACCOUNT") and os.environ.get("CDK_DEFAULT_REGION"):
        env = cdk.Environment(
            account=os.environ["CDK_DEFAULT_ACCOUNT"], region=os.environ["CDK_DEFAULT_REGION"]
        )
    stack = LetheStack(app, c.STACK_ID, config=config, env=env, spark_jobs_dir=spark_jobs_dir)
    cdk.Tags.of(stack).add("project", c.SERVICE)
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.app", description="Synthesize Lethe.")
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "-o",
        "--output",
        default=os.environ.get("CDK_OUTDIR", str(ROOT / "cdk.out")),
        help="cloud assembly directory (default: $CDK_OUTDIR or ./cdk.out)",
    )
    parser.add_argument("--no-nag", action="store_true", help="skip the cdk-nag checks")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        app, _ = build_app(
            context=parse_context(args.context), outdir=args.output, nag=not args.no_nag
        )
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        assembly = app.synth()
    except RuntimeError as e:  # jsii surfaces validation failures as RuntimeError
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"synthesized {c.STACK_ID} into {assembly.directory} in {time.monotonic() - started:.1f}s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

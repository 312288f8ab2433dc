"""cdk-nag acknowledgments, written next to the resource they concern.

cdk-nag 3 reads CDK's native ``Validations.of(scope).acknowledge(...)``; every finding of a
rule that reports several (IAM4, IAM5) is acknowledged one by one, by its exact finding id,
so a new wildcard that nobody reviewed still fails the synth. Every acknowledgment carries a
reason; :func:`acknowledgments` lists them all for the tests and the docs.
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

PACK = "AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str, *findings: str) -> None:
    """Acknowledge ``rule`` (e.g. ``"AwsSolutions-IAM5"``) on ``scope`` and its children.

    Args:
        scope: the construct the finding is reported on, or an ancestor of it.
        rule: the rule id, without pack prefix or finding suffix.
        reason: why the finding is acceptable here; must say something.
        findings: finding ids (``"Resource::*"``); none acknowledges the bare rule.
    """
    if len(reason.strip()) < 20:
        raise ValueError(f"acknowledging {rule} needs a real reason, got {reason!r}")
    ids = [f"{PACK}::{rule}[{f}]" for f in findings] if findings else [f"{PACK}::{rule}"]
    cdk.Validations.of(scope).acknowledge(*(cdk.Acknowledgment(id=i, reason=reason) for i in ids))


def arn_ref(resource: cdk.CfnResource, suffix: str = "", *, attribute: str = "Arn") -> str:
    """How cdk-nag spells ``Fn::GetAtt [resource, attribute]`` + ``suffix`` in a finding id."""
    stack = cdk.Stack.of(resource)
    logical_id = stack.resolve(stack.get_logical_id(resource))
    return f"<{logical_id}.{attribute}>{suffix}"


def acknowledgments(scope: IConstruct) -> list[tuple[str, str, str]]:
    """All acknowledgments recorded under ``scope``: (construct path, id, reason)."""
    found: list[tuple[str, str, str]] = []
    for node in scope.node.find_all():
        for entry in node.node.metadata:
            if entry.type != cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                continue
            data = entry.data  # {acknowledged id: reason}
            if isinstance(data, dict):
                found.extend((node.node.path, str(k), str(v)) for k, v in data.items())
    return found

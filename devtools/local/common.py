"""What every part of the local runtime shares: paths, the local account, region and stack
name, how resources are named, and the one error."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ACCOUNT",
    "CODE_ROOT",
    "REGION",
    "ROOT",
    "SPARK_JOBS",
    "STACK_NAME",
    "LocalRunError",
    "Names",
]

ROOT = Path(__file__).resolve().parents[2]
CODE_ROOT = ROOT / "functions"
SPARK_JOBS = ROOT / "spark_jobs"
STACK_NAME = "LetheStack"
ACCOUNT = "123456789012"
REGION = "us-east-1"


class LocalRunError(RuntimeError):
    """The local runner cannot do what was asked (unresolvable template, moto changed, …)."""


@dataclass(frozen=True, slots=True)
class Names:
    """Local resource names: ``<stack>-<logical id>`` cut to the service's limit, plus a
    suffix (empty for stable names; random so that several runtimes can share one moto).

    >>> Names("a1b2c3").of("DeleteQueue", 80)
    'LetheStack-DeleteQueue-a1b2c3'
    >>> Names("").of("StorageBucket", 63, lower=True)
    'lethestack-storagebucket'
    """

    suffix: str

    def of(self, lid: str, limit: int, *, lower: bool = False) -> str:
        tail = f"-{self.suffix}" if self.suffix else ""
        name = f"{STACK_NAME}-{lid}"[: limit - len(tail)] + tail
        return name.lower() if lower else name

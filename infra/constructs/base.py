"""What the table's constructs are built on, passed to each as one value."""

from __future__ import annotations

from dataclasses import dataclass

from infra.config import LetheConfig
from infra.constructs.runtime import LambdaRuntime
from infra.constructs.storage import TableStorage


@dataclass(frozen=True, slots=True)
class Foundation:
    """The deployment's settings, the runtime that makes the functions and the table storage
    they are granted on (its key, if any, is ``storage.encryption_key``).

    Attributes:
        config: the settings each construct reads its own values from.
        runtime: layers, code asset and the function factory.
        storage: the table bucket and its grant helpers.
    """

    config: LetheConfig
    runtime: LambdaRuntime
    storage: TableStorage

"""A run's workspace: where it keeps its plan, batches and step results.

:class:`S3Workspace` is ``<table>/_gc/<run id>/`` (the Step Functions workflow, whose steps
run in separate Lambdas); :class:`MemoryWorkspace` keeps them in the process
(:func:`lethe.gc.collect`). The documents are the models of :mod:`lethe.gc.models`.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from lethe import errors
from lethe.catalog.commit import Catalog
from lethe.errors import GcRunNotFound
from lethe.gc.areas import RUN_ID, WORKSPACE

__all__ = ["MemoryWorkspace", "S3Workspace", "Workspace", "decode"]

_M = TypeVar("_M", bound=BaseModel)


class Workspace(Protocol):
    """Where a run keeps its plan, batches and step results."""

    def write(self, name: str, doc: BaseModel) -> str: ...

    def read(self, name: str, model: type[_M]) -> _M: ...

    def names(self, prefix: str) -> list[str]: ...


class MemoryWorkspace:
    """In-process workspace (the CLI's :func:`collect`): nothing is written to the bucket."""

    def __init__(self) -> None:
        self._docs: dict[str, BaseModel] = {}

    def write(self, name: str, doc: BaseModel) -> str:
        self._docs[name] = doc
        return name

    def read(self, name: str, model: type[_M]) -> _M:
        doc = self._docs.get(name)
        if not isinstance(doc, model):
            raise GcRunNotFound(f"no {name} in this run's workspace")
        return doc

    def names(self, prefix: str) -> list[str]:
        return sorted(n for n in self._docs if n.startswith(prefix))


class S3Workspace:
    """``<table>/_gc/<run id>/`` in the table's bucket (the Step Functions workflow)."""

    def __init__(self, catalog: Catalog, run_id: str) -> None:
        if not RUN_ID.match(run_id):
            raise errors.InvalidRequest(f"not a GC run id: {run_id!r}")
        self.catalog = catalog
        self.run_id = run_id

    def key(self, name: str) -> str:
        return self.catalog.key(f"{WORKSPACE}{self.run_id}/{name}")

    def write(self, name: str, doc: BaseModel) -> str:
        key = self.key(name)
        self.catalog.store.put(key, doc.model_dump_json().encode(), content_type="application/json")
        return f"s3://{self.catalog.store.bucket}/{key}"

    def read(self, name: str, model: type[_M]) -> _M:
        key = self.key(name)
        try:
            raw = self.catalog.store.get(key).body
        except errors.NotFound as e:
            raise GcRunNotFound(
                f"GC run {self.run_id} of {self.catalog.uri} has no {name} "
                "(wrong run id, or its workspace was already cleaned up)"
            ) from e
        return decode(raw, model, f"s3://{self.catalog.store.bucket}/{key}")

    def names(self, prefix: str) -> list[str]:
        base = self.key("")
        return sorted(o.key[len(base) :] for o in self.catalog.store.list(base + prefix))


def decode(raw: bytes, model: type[_M], where: str) -> _M:
    """``raw`` JSON as a ``model``; InvalidRequest naming ``where`` if it is not one."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as e:
        raise errors.InvalidRequest(f"{where} is not a valid {model.__name__}: {e}") from e

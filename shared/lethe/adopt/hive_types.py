"""Hive column types (as the Glue Data Catalog stores them) as Arrow types.

``timestamp`` is Hive's zone-less timestamp (microseconds); ``varchar(n)``/``char(n)`` are
strings (the length is a constraint of writers, not of the data).

>>> hive_type("decimal(12,2)")
Decimal128Type(decimal128(12, 2))
>>> hive_type("array<struct<a:int,b:map<string,bigint>>>")
ListType(list<element: struct<a: int32, b: map<string, int64>>>)
>>> hive_type("varchar(20)"), hive_type("TIMESTAMP")
(DataType(string), TimestampType(timestamp[us]))
"""

from __future__ import annotations

import pyarrow as pa

from lethe import errors

__all__ = ["hive_type"]

_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "varchar": pa.string(),
    "char": pa.string(),
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us"),
}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text.replace(" ", "").lower()
        self.pos = 0

    def fail(self, why: str) -> errors.UnsupportedSource:
        return errors.UnsupportedSource(f"Hive type {self.text!r}: {why} at {self.pos}")

    def word(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and (
            self.text[self.pos].isalnum() or self.text[self.pos] == "_"
        ):
            self.pos += 1
        if start == self.pos:
            raise self.fail("expected a name")
        return self.text[start : self.pos]

    def expect(self, c: str) -> None:
        if not self.text.startswith(c, self.pos):
            raise self.fail(f"expected {c!r}")
        self.pos += 1

    def args(self) -> list[int]:
        if not self.text.startswith("(", self.pos):
            return []
        end = self.text.index(")", self.pos)
        out = [int(x) for x in self.text[self.pos + 1 : end].split(",")]
        self.pos = end + 1
        return out

    def type(self) -> pa.DataType:
        name = self.word()
        if name == "array":
            self.expect("<")
            item = self.type()
            self.expect(">")
            return pa.list_(pa.field("element", item))
        if name == "map":
            self.expect("<")
            k = self.type()
            self.expect(",")
            v = self.type()
            self.expect(">")
            return pa.map_(k, v)
        if name == "struct":
            self.expect("<")
            fields = []
            while True:
                fname = self.word()
                self.expect(":")
                fields.append(pa.field(fname, self.type()))
                if not self.text.startswith(",", self.pos):
                    break
                self.pos += 1
            self.expect(">")
            return pa.struct(fields)
        args = self.args()
        if name in ("decimal", "numeric"):
            p, s = (args + [10, 0][len(args) :])[:2]
            return pa.decimal128(p, s)
        if name in _PRIMITIVES:
            return _PRIMITIVES[name]
        raise self.fail(f"type {name!r} is not read")


def hive_type(text: str) -> pa.DataType:
    """The Arrow type of a Hive type string.

    Raises:
        UnsupportedSource: a type Lethe does not read (``uniontype``, ``interval``...) or a
            malformed string.
    """
    p = _Parser(text)
    try:
        t = p.type()
    except ValueError as e:
        raise p.fail(str(e)) from e
    if p.pos != len(p.text):
        raise p.fail("unexpected text")
    return t

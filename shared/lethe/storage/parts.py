"""A multipart part's body for botocore, read from the buffers written into it (no copy)."""

from __future__ import annotations

import base64
import builtins
import io
import zlib

__all__ = ["PartBody"]


class PartBody:
    """One part's body for botocore: the buffers written into it, read as they are (views,
    no join, no copy); ``seek(0)`` rewinds it for a retry."""

    def __init__(self, chunks: builtins.list[bytes]) -> None:
        self._chunks = [c for c in chunks if c]  # an empty read means the end
        self._len = sum(len(c) for c in self._chunks)
        self._i = self._off = self._pos = 0

    def __len__(self) -> int:
        return self._len

    def crc32_b64(self) -> str:
        crc = 0
        for c in self._chunks:
            crc = zlib.crc32(c, crc)
        return base64.b64encode(crc.to_bytes(4, "big")).decode("ascii")

    def read(self, n: int | None = -1) -> bytes | memoryview:
        if self._i >= len(self._chunks):
            return b""
        c = self._chunks[self._i]
        k = len(c) - self._off if n is None or n < 0 else min(n, len(c) - self._off)
        out = c if k == len(c) else memoryview(c)[self._off : self._off + k]
        self._off += k
        self._pos += k
        if self._off >= len(c):
            self._i, self._off = self._i + 1, 0
        return out

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = 0) -> int:
        if (pos, whence) != (0, 0):
            raise io.UnsupportedOperation("a part body rewinds only to its start")
        self._i = self._off = self._pos = 0
        return 0

"""What every file object of the library answers alike (the ``io`` protocol pyarrow and
botocore ask of one): whether it reads, writes or seeks, and where it is."""

from __future__ import annotations

__all__ = ["FileObject"]


class FileObject:
    """A file object's capability queries, from class flags, and its position ``_pos``."""

    READABLE = WRITABLE = SEEKABLE = False
    _pos = 0

    def readable(self) -> bool:
        return self.READABLE

    def writable(self) -> bool:
        return self.WRITABLE

    def seekable(self) -> bool:
        return self.SEEKABLE

    def tell(self) -> int:
        return self._pos

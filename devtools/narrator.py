"""What a demo chapter (``demo_adopt``, ``demo_lake``, ``demo_layout``) needs of the story it
is told in; :class:`devtools.demo.Story` is one."""

from __future__ import annotations

from typing import Protocol


class Narrator(Protocol):
    def step(self, title: str) -> None: ...
    def say(self, msg: str) -> None: ...

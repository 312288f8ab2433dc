"""``python -m lethe.cli``: the ``lethe`` command."""

from lethe.cli import console_main

console_main()

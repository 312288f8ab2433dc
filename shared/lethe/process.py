"""How Lethe's command-line entry points end their process.

pyarrow's C++ thread pools can abort the interpreter while it tears itself down
(``terminate called without an active exception``, exit status -6/134: the apache/arrow#34314
family). The work is done by then, but the exit status says it failed, and a job runner (EMR,
Step Functions, a shell script, CI) believes it. So every ``__main__`` of Lethe (the ``lethe``
console script, the Spark jobs, the local runtime and demo) ends through :func:`run_main`:
it runs ``main``, flushes what the program wrote, and leaves with :func:`os._exit`, which skips
the interpreter teardown where the abort happens. Exit statuses keep their usual meaning:

* ``main`` returns ``n`` (or raises ``SystemExit(n)``): status ``n``;
* an uncaught exception: its traceback on stderr, status 1;
* Ctrl-C: status 130;
* the reader of stdout went away (``lethe history | head``): quietly, status 141, as Unix tools
  killed by SIGPIPE do.

Nothing registered with :mod:`atexit` runs; logging handlers are flushed explicitly.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_INTERRUPTED", "run_main"]

EXIT_BROKEN_PIPE = 128 + 13  # the shell's status for a process killed by SIGPIPE
EXIT_INTERRUPTED = 128 + 2


def _status(code: object) -> int:
    """``sys.exit`` semantics: None is 0, an int is itself, anything else is printed, 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _flush() -> bool:
    """Flush stdout, stderr and logging handlers; False if stdout's reader has gone."""
    ok = True
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            ok = False
        except (OSError, ValueError):  # closed or detached: nothing more can be written
            pass
    logging.shutdown()
    return ok


def _silence_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so no later flush raises again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


def run_main(main: Callable[[], object]) -> NoReturn:
    """Run a program's ``main()`` and end the process as the module docstring describes.

    Example::

        if __name__ == "__main__":
            run_main(main)
    """
    try:
        code = _status(main())
    except SystemExit as e:
        code = _status(e.code)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        code = EXIT_BROKEN_PIPE
    except BaseException:
        traceback.print_exc()
        code = 1
    if not _flush():
        _silence_stdout()
        code = code or EXIT_BROKEN_PIPE
    os._exit(code)

"""How the command line reports a failure: one line on stderr and an exit code.

    tensorforge: error: <what went wrong, in one sentence>        exit 1 (2 for a usage error)
    tensorforge: internal error: <type>: <message>; ...           exit 1, for a bug in tensorforge

User errors are `errors.UserError` (a bad option, model, file or a missing optional package)
and OSError (a file that cannot be read or written).  Anything else is a bug in tensorforge:
its line says so and how to see the traceback.  With TENSORFORGE_DEBUG set (to anything but 0)
the traceback is printed before the line, for every failure.
"""
from __future__ import annotations

import os
import sys
import traceback

from ..errors import UserError, one_line

PREFIX = "tensorforge"
INTERRUPTED = 130           # the shell's code for a process ended by Ctrl-C (128 + SIGINT)


def debug_enabled() -> bool:
    return os.environ.get("TENSORFORGE_DEBUG", "") not in ("", "0")


def report(err: BaseException) -> int:
    """Print the line for `err` on stderr (and the traceback in debug mode); return the exit code."""
    if debug_enabled():
        traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
    line, code = describe(err)
    print(f"{PREFIX}: {line}", file=sys.stderr, flush=True)
    return code


def describe(err: BaseException) -> tuple[str, int]:
    """(the line after "tensorforge: ", the exit code) for a failure."""
    if isinstance(err, KeyboardInterrupt):
        return "interrupted", INTERRUPTED
    if isinstance(err, UserError):
        return f"error: {one_line(str(err))}", err.exit_code
    if isinstance(err, OSError):
        return f"error: {_os_error(err)}", 1
    from ..runtime.compile import CompileError
    if isinstance(err, CompileError):
        return f"error: {_compile_error(err)}", 1
    hint = "" if debug_enabled() else "; rerun with TENSORFORGE_DEBUG=1 to see the traceback, and please report it"
    text = one_line(str(err)) or "(no message)"
    return f"internal error: {type(err).__name__}: {text}{hint}", 1


def _os_error(err: OSError) -> str:
    if err.strerror and err.filename is not None:
        what = err.strerror[0].lower() + err.strerror[1:]
        return f"{what}: {err.filename}"
    return one_line(str(err))


def _compile_error(err: Exception) -> str:
    """The first line of a C compiler failure and where its source was kept (the compiler's
    output, many lines, is in the message that TENSORFORGE_DEBUG=1 prints)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    head = lines[0].rstrip(".") if lines else "C compilation failed"
    kept = next((ln for ln in lines if ln.startswith("source kept at:")), "")
    more = "" if debug_enabled() else "; rerun with TENSORFORGE_DEBUG=1 to see the compiler's output"
    return f"{head}{'; ' + kept if kept else ''}{more}"

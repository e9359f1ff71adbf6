"""Errors that speak to the user, and warnings that read as one line.

`UserError` marks a mistake in what the user gave (a file, a model, an option, a missing
optional package) as opposed to a bug in tensorforge.  The command line prints a UserError as
one line, `tensorforge: error: <message>`, and exits with its `exit_code`; anything else is an
internal error.  The classes raised for such mistakes across the package derive from it (and,
where they existed before, from the built-in class they had, so `except ValueError` still
catches them).

This module sits at the bottom of the layers: it imports nothing from tensorforge.
"""
from __future__ import annotations

import warnings
from typing import TextIO


class UserError(Exception):
    """Something the user gave is wrong; the message says what, in one sentence."""

    exit_code = 1


class UsageError(UserError):
    """The command line itself is wrong: an unknown option, a value out of range."""

    exit_code = 2


class InputError(UserError, ValueError):
    """A file or value given to tensorforge cannot be used (a bad array, an unknown name)."""


class MissingDependencyError(UserError, ImportError):
    """An optional package that a feature needs is not installed; the message says how to get it."""


def one_line(text: str) -> str:
    """A possibly multi-line message folded into one line (lines joined with "; ")."""
    parts = [p.strip() for p in str(text).splitlines() if p.strip()]
    if not parts:
        return ""
    head, rest = parts[0], parts[1:]
    if rest and head.endswith(":"):
        return f"{head} {'; '.join(rest)}"
    return "; ".join(parts)


def format_warning(message, category, filename=None, lineno=None, line=None) -> str:
    """`tensorforge: warning: <message>` on one line: no file, line number or source text."""
    kind = "" if category in (UserWarning, RuntimeWarning) else f"{category.__name__}: "
    return f"tensorforge: warning: {kind}{one_line(str(message))}\n"


def show_warning(message, category, filename, lineno, file: TextIO | None = None, line=None) -> None:
    """A `warnings.showwarning` that writes `format_warning`'s line to stderr (or `file`)."""
    import sys

    stream = file if file is not None else sys.stderr
    try:
        stream.write(format_warning(message, category))
        stream.flush()
    except (OSError, ValueError):      # a closed stream: the warning is lost, as with the default
        pass


def install_warning_format() -> None:
    """Make this process print warnings as one line each (the command line does this)."""
    warnings.showwarning = show_warning

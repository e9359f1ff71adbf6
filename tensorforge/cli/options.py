"""Option values of the command line, checked where they are read.

Each function here is an argparse `type`: it turns the text of one option into its value or
raises `argparse.ArgumentTypeError` with a sentence that says what is expected.  argparse then
reports `argument --threads: ...` through `OneLineParser.error`: one line on stderr, exit code 2
(a usage error), instead of argparse's usage block.
"""
from __future__ import annotations

import argparse
from typing import Callable

from ..errors import UsageError

OPT_LEVELS = range(0, 4)      # graph/pipeline.py: 0 runs only what correctness needs, 3 runs every pass


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors raise UsageError (one line, exit code 2) instead of
    printing the usage block and exiting; `main` reports them like every other error."""

    def error(self, message: str):      # type: ignore[override]
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def int_at_least(low: int, what: str = "") -> Callable[[str], int]:
    """A whole number >= `low`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what or 'a whole number'} of at least {low}, got {value}")
        return value

    parse.__name__ = f"int>={low}"
    return parse


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def opt_level(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value not in OPT_LEVELS:
        raise argparse.ArgumentTypeError(f"expected an optimization level from {OPT_LEVELS[0]} to {OPT_LEVELS[-1]}, "
                                         f"got {text!r}")
    return value


def duration(text: str) -> str:
    """A time budget ("600", "90s", "10m", "1.5h"), checked now and passed on as text."""
    from ..autotune.tuner import parse_duration
    try:
        parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


PRECISIONS = ("fp32", "bf16")


def add_precision_option(p) -> None:
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="bf16: convolutions and matrix products in bfloat16 with float32 accumulation, "
                        "printed with their accuracy against fp32 (default fp32)")


def target(text: str) -> str:
    from ..target import Target
    try:
        Target.parse(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def shape(text: str) -> tuple[str, tuple[int, ...]]:
    """`name=d0,d1,...` -> (name, dims); every dimension a positive whole number."""
    name, sep, dims = text.partition("=")
    if not sep or not name or not dims:
        raise argparse.ArgumentTypeError(f"expected name=d0,d1,... (e.g. x=1,3,224,224), got {text!r}")
    try:
        values = tuple(int(d) for d in dims.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"the dimensions of {name} must be whole numbers, got {dims!r}") from None
    if any(d < 1 for d in values):
        raise argparse.ArgumentTypeError(f"the dimensions of {name} must be at least 1, got {dims!r}")
    return name, values


def shapes(items: list | None) -> dict[str, tuple[int, ...]]:
    """{name: dims} from repeated --shape options; a name given twice is a usage error."""
    out: dict[str, tuple[int, ...]] = {}
    for name, dims in items or []:
        if name in out and out[name] != dims:
            raise UsageError(f"--shape gives {name} twice: {','.join(map(str, out[name]))} and "
                             f"{','.join(map(str, dims))}")
        out[name] = dims
    return out


def add_shape_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", action="append", type=shape, metavar="NAME=D0,D1,...",
                        help="the shape of an input whose dimensions are symbolic or unknown in the model "
                             "(repeat per input)")


def add_target_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="c -mcpu=native", type=target,
                        help='target string (default "c -mcpu=native")')


def thread_counts(text: str) -> list[int]:
    """A comma-separated list of thread counts, each at least 1: "1,2"."""
    one = int_at_least(1, "a thread count")
    counts = [one(part.strip()) for part in text.split(",") if part.strip()]
    if not counts:
        raise argparse.ArgumentTypeError(f"expected thread counts such as 1,2, got {text!r}")
    return counts


def add_threads_option(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--threads", type=int_at_least(1, "a thread count"), default=None, help=help)

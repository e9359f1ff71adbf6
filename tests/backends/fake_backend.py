"""A backend defined outside the package, as a plug-in is: one module that defines `BACKEND`.

It builds C for the host with the CPU backend's steps, and adds a loop-IR pass at every phase
that records which function it saw, and what that function looked like, in `SEEN`.  A test
registers it with one `register(KindSpec(...))` line (tests/backends/test_backend_plugin.py).
"""
from __future__ import annotations

from tensorforge.backends import cpu
from tensorforge.backends.base import PHASES, Backend
from tensorforge.ir.functor import post_order_visit
from tensorforge.tir import nodes as N

SEEN: list = []          # (phase, function name, rank of the first buffer store's index)
RENDERED: list = []      # names of the functions each render call printed


def _store_rank(func: N.PrimFunc) -> int:
    ranks = []
    post_order_visit(func.body, lambda n: ranks.append(len(n.indices)) if isinstance(n, N.BufferStore) else None)
    return ranks[0] if ranks else 0


def _recorder(phase: str):
    def record(func: N.PrimFunc) -> N.PrimFunc:
        SEEN.append((phase, func.name, _store_rank(func)))
        return func
    return record


def render(funcs, target, sequences=(), text_cache=None):
    RENDERED.append([f.name for f in funcs])
    return cpu.render(funcs, target, sequences, text_cache)


def compile(source, target):  # noqa: A001 - the protocol's name
    return cpu.compile(source, cpu.Target.parse("c -O2"))


BACKEND = Backend(name="fake", dialect="c", render=render, compile=compile, load=cpu.load, memory=cpu.HOST,
                  timer=cpu.timer, make_model=cpu.make_model,
                  passes={phase: ((f"record_{phase}", _recorder(phase)),) for phase in PHASES})

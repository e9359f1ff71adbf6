"""The accelerator backend: PrimFuncs -> instruction streams -> a Module that runs them on the
simulator (the `kernels -> Module` arrow for target kind "accel").

- render: emit.py walks each lowered PrimFunc and produces its blocks; tokens.py inserts the
  dependence tokens and FINISH.  The "source" is the stream (`.text` prints it).
- compile: every field is encoded (a field that overflows is an EncodingError naming it) and
  check_stream proves the stream free of deadlocks, leftover tokens and races, with the micro-op
  kernels in the DRAM image so GEMM/ALU footprints are checked too.
- load: `AccelModule`, called with NumPy arrays in the parameters' shapes and dtypes: it copies
  them into a DRAM image, runs the simulator, copies the outputs back and keeps the counters in
  `module.stats`.

The target's `-config=<preset>` option picks the hardware configuration (config.PRESETS).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ...runtime.memory import HOST
from ...target import Target
from ...tir import nodes as N
from ..base import Backend
from .checker import StreamReport, check_stream
from .config import AccelConfig, preset
from .emit import ALIGN, Emitter, ParamLayout
from .isa import Insn, encode_program, format_program
from .simulator import Simulator, Stats
from .tokens import assemble


def config_of(target: Target) -> AccelConfig:
    """The hardware configuration a target names (`accel -config=paper`)."""
    return preset(Target.parse(target).option("config"))


@dataclass
class AccelProgram:
    """One kernel's instruction stream with its DRAM layout."""

    name: str
    program: tuple
    params: tuple                    # tuple[ParamLayout], in call order
    image: np.ndarray                # DRAM template: the micro-op kernels, zeros elsewhere
    config: AccelConfig
    report: StreamReport | None = None

    @property
    def text(self) -> str:
        return f"// {self.name}: {len(self.program)} instructions\n{format_program(self.program)}"


@dataclass
class AccelSource:
    programs: list = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n\n".join(p.text for p in self.programs)


def emit_program(func: N.PrimFunc, config: AccelConfig) -> AccelProgram:
    """The instruction stream of one lowered PrimFunc (not yet checked)."""
    blocks, params, image = Emitter(func, config).run()
    return AccelProgram(func.name, assemble(blocks), params, image, config)


def render(funcs: Sequence[N.PrimFunc], target: Target, sequences=(), text_cache=None) -> AccelSource:
    config = config_of(target)
    return AccelSource([emit_program(f, config) for f in funcs])


def compile(source: AccelSource, target: Target) -> AccelSource:  # noqa: A001 - the protocol's name
    """Encode every instruction and check every stream (ProtocolError / EncodingError)."""
    for p in source.programs:
        encode_program(p.program, p.config)
        p.report = check_stream(p.program, p.config, dram=_image(p, {}))
    return source


def _image(p: AccelProgram, arrays: dict) -> np.ndarray:
    """The DRAM image with `arrays` ({param name: array}) in place."""
    end = max([lay.byte_offset + _nbytes(lay) for lay in p.params] + [len(p.image)])
    image = np.zeros(-(-end // ALIGN) * ALIGN, np.uint8)
    image[:len(p.image)] = p.image
    for lay in p.params:
        a = arrays.get(lay.name)
        if a is not None:
            data = np.ascontiguousarray(a).view(np.uint8).reshape(-1)
            image[lay.byte_offset:lay.byte_offset + data.size] = data
    return image


def _nbytes(lay: ParamLayout) -> int:
    return int(np.prod(lay.shape)) * np.dtype(lay.dtype).itemsize


class AccelModule:
    """Kernels callable on NumPy arrays; each call runs the simulator.  `program` is the (first)
    kernel's instruction stream, `stats` the counters of the last call."""

    def __init__(self, source: AccelSource, target: Target):
        self.target = target
        self.kernels = {p.name: p for p in source.programs}
        self.source = source.text
        self.stats: Stats | None = None
        self._first = source.programs[0]

    @property
    def program(self) -> tuple[Insn, ...]:
        return self._first.program

    @property
    def config(self) -> AccelConfig:
        return self._first.config

    def __call__(self, *arrays: np.ndarray) -> Stats:
        return self.run(self._first.name, *arrays)

    def __getitem__(self, name: str):
        if name not in self.kernels:
            raise KeyError(f"no kernel {name!r} in this module (it has {', '.join(self.kernels)})")
        return lambda *arrays: self.run(name, *arrays)

    get_function = __getitem__       # the Module interface the tuner's builder asks for

    def run(self, name: str, *arrays: np.ndarray) -> Stats:
        p = self.kernels[name]
        if len(arrays) != len(p.params):
            raise TypeError(f"{name} takes {len(p.params)} arrays "
                            f"({', '.join(lay.name for lay in p.params)}), got {len(arrays)}")
        bound = {}
        for lay, a in zip(p.params, arrays):
            if not isinstance(a, np.ndarray):
                raise TypeError(f"{name}: argument {lay.name} must be a NumPy array, got {type(a).__name__}")
            if a.shape != lay.shape or a.dtype != np.dtype(lay.dtype):
                raise ValueError(f"{name}: argument {lay.name} must be {lay.dtype}{list(lay.shape)}, "
                                 f"got {a.dtype}{list(a.shape)}")
            bound[lay.name] = a
        image = _image(p, bound)
        self.stats = Simulator(p.config).run(p.program, image)
        for lay, a in zip(p.params, arrays):
            if lay.is_output:
                a[...] = image[lay.byte_offset:lay.byte_offset + _nbytes(lay)].view(a.dtype).reshape(a.shape)
        return self.stats


def load(source: AccelSource, funcs: Sequence[N.PrimFunc], _source, target: Target) -> AccelModule:
    return AccelModule(source, target)


def timer(module: AccelModule, name: str, number: int = 1, repeat: int = 1, min_repeat_ms: float = 0):
    """Simulated seconds (cycles at the configuration's clock) per run: the tuner's measurement."""
    def evaluate(*arrays) -> list:
        return [module.run(name, *arrays).seconds for _ in range(max(1, repeat))]
    return evaluate


def make_model(spec, module, params, info=None):
    """A graph's model: its CPU kernels plus the accelerator's steps (offload.py)."""
    from .offload import make_model as offload_model
    return offload_model(spec, module, params, info)


def place(groups, target: Target) -> dict:
    """The groups the accelerator runs (offload.py)."""
    from .offload import place as offload_place
    return offload_place(groups, target)


BACKEND = Backend(name="accel", dialect="accel", render=render, compile=compile, load=load, memory=HOST,
                  timer=timer, make_model=make_model, host_target="c", place=place)

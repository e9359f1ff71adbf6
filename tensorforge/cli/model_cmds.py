"""`tensorforge compile` (ONNX -> one .tfm file) and `tensorforge run` (a .tfm on arrays from
.npy / .npz files, outputs written as .npy into a folder)."""
from __future__ import annotations

import argparse
import os
import time

from ..errors import InputError, UsageError
from . import options
from .common import load_compiled, load_graph, progress


def compile_model(opts: argparse.Namespace) -> int:
    import tensorforge

    progress(f"[1/3] importing {opts.model}")
    graph = load_graph(opts.model, options.shapes(opts.shape))
    progress(f"[2/3] compiling {len(graph.nodes)} nodes for target {opts.target!r}")
    t0 = time.perf_counter()
    if opts.threads is not None:
        from tensorforge.runtime.module import set_num_threads
        set_num_threads(opts.threads)
    model = tensorforge.compile(graph, target=opts.target, opt_level=opts.opt_level, records=opts.records)
    progress(f"      {len(model.spec.steps)} kernels in {time.perf_counter() - t0:.1f} s; "
             f"{model.info['plan'].summary()}")
    if opts.records:
        progress(f"      tuning records applied to {model.info['tuned_groups']} kernel(s)")
    out = opts.output or os.path.splitext(os.path.basename(opts.model))[0] + ".tfm"
    model.export(out)
    progress(f"[3/3] wrote {out}")
    return 0


def run_model(opts: argparse.Namespace) -> int:
    import numpy as np

    model = load_compiled(opts.model)
    if not opts.input:
        raise UsageError(f"give the inputs with --input NAME=FILE.npy or --input FILE.npz; the model takes "
                         f"{_signature(model)}")
    named = read_inputs(opts.input, model.input_names)
    check_inputs(model, named)
    outs = model.run(**named)
    os.makedirs(opts.output_dir, exist_ok=True)
    for name, arr in zip(model.output_names, outs):
        path = os.path.join(opts.output_dir, f"{_file_name(name)}.npy")
        np.save(path, arr)
        print(f"{name}: {arr.dtype}{list(arr.shape)} -> {path}")
    return 0


def read_inputs(items: list[str], input_names: list[str]) -> dict:
    """{input name: array} from --input items: NAME=FILE.npy, NAME=FILE.npz (the archive's array
    of that name, or its only one), FILE.npz (every array of the archive, by name) or FILE.npy
    (for a model with one input)."""
    named: dict = {}

    def put(name: str, array, where: str) -> None:
        if name in named:
            raise UsageError(f"input {name} is given twice (again in {where})")
        named[name] = array

    for item in items:
        name, sep, path = item.partition("=")
        if not sep:
            name, path = "", item
        arrays = _read_arrays(path)
        if name:
            if len(arrays) == 1:
                put(name, next(iter(arrays.values())), path)
            elif name in arrays:
                put(name, arrays[name], path)
            else:
                raise InputError(f"{path} holds no array named {name} (it holds {', '.join(arrays)})")
        elif path.endswith(".npz"):
            if not arrays:
                raise InputError(f"{path} holds no arrays")
            for key, array in arrays.items():
                put(key, array, path)
        elif len(input_names) == 1:
            put(input_names[0], next(iter(arrays.values())), path)
        else:
            raise UsageError(f"--input {item}: say which input it is (NAME={path}); the model takes "
                             f"{', '.join(input_names)}")
    unknown = [n for n in named if n not in input_names]
    if unknown:
        raise InputError(f"the model has no input {', '.join(unknown)}; its inputs are {', '.join(input_names)}")
    missing = [n for n in input_names if n not in named]
    if missing:
        raise InputError(f"no array given for input {', '.join(missing)} (the model takes {', '.join(input_names)})")
    return named


def check_inputs(model, named: dict) -> None:
    """Each array has the dtype and shape the compiled model takes."""
    for name in model.input_names:
        info = model.spec.values[name]
        want_shape, want_dtype = tuple(info["shape"]), str(info["dtype"])
        a = named[name]
        if a.dtype.name != want_dtype or a.shape != want_shape:
            raise InputError(f"input {name}: the model takes {want_dtype}{list(want_shape)}, "
                             f"the file holds {a.dtype.name}{list(a.shape)}")


def _read_arrays(path: str) -> dict:
    """{name: array} of a .npz, or {"": array} of a .npy."""
    import numpy as np

    try:
        data = np.load(path, allow_pickle=False)
    except (ValueError, EOFError) as err:
        raise InputError(f"cannot read {path} as a NumPy .npy or .npz file: {err}") from None
    if isinstance(data, np.ndarray):
        return {"": data}
    with data:
        return {k: data[k] for k in data.files}


def _signature(model) -> str:
    return ", ".join(f"{n} {model.spec.values[n]['dtype']}{list(model.spec.values[n]['shape'])}"
                     for n in model.input_names)


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)

"""torch.compile(model, backend="tensorforge") against the same model through ONNX
(torch.onnx.export, then tensorforge.frontend.from_onnx and compile), at one thread.

    python benchmarks/torch_compile.py [--models dqn,resnet18] [--repeat 20] [--target "c -mcpu=native"]

The modules are benchmarks/exports/models.py's (the paper's workloads as torch.nn modules).
Both paths compile for the same target and run with one thread (tensorforge's runtime and
PyTorch's); their calls are interleaved (one of each per round) so that a busy machine slows
both alike.  Each path's output is checked against eager PyTorch before it is timed.  Printed:
compile seconds of each path, the median ms per call, and the ratio dynamo/ONNX (below 1: the
torch.compile path is faster).  A graph that torch.compile would leave to eager PyTorch stops the benchmark.  Export uses the TorchScript exporter (dynamo=False), which needs
no onnxscript.
"""
from __future__ import annotations

import argparse
import importlib.util
import io
import os
import statistics
import sys
import tempfile
import time
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _models():
    spec = importlib.util.spec_from_file_location("tf_export_models", HERE / "exports" / "models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _onnx_path(torch, module, args: tuple, models, name: str) -> tuple:
    import tensorforge
    from tensorforge.frontend import from_onnx
    path = os.path.join(tempfile.mkdtemp(), f"{name}.onnx")
    with warnings.catch_warnings(), redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, input_names=models.input_names(name),
                          output_names=models.output_names(name), dynamo=False)
    return path, tensorforge, from_onnx


def bench(name: str, repeat: int, target: str) -> dict:
    import torch

    import tensorforge.frontend.torch_dynamo as tf_dynamo
    from tensorforge.runtime.module import set_num_threads
    models = _models()
    torch.set_num_threads(1)
    set_num_threads(1)
    module, feeds = models.get(name, seed=0)
    args = tuple(torch.from_numpy(a) for a in feeds.values())
    with torch.no_grad():
        want = module(*args).numpy()

    t0 = time.perf_counter()
    path, tensorforge, from_onnx = _onnx_path(torch, module, args, models, name)
    via_onnx = tensorforge.compile(from_onnx(path), target=target)
    onnx_s = time.perf_counter() - t0
    arrays = [a.numpy() for a in args]

    tf_dynamo.register()
    torch._dynamo.reset()
    fast = torch.compile(module, backend="tensorforge", options={"target": target})
    t0 = time.perf_counter()
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got_dynamo = fast(*args).numpy()
    dynamo_s = time.perf_counter() - t0
    fallbacks = [str(w.message) for w in caught if "runs in eager PyTorch" in str(w.message)]
    if fallbacks:   # a timing of eager PyTorch would be reported as tensorforge's
        raise SystemExit(f"{name}: {fallbacks[0]}")
    got_onnx = via_onnx(*arrays)[0]
    err = max(float(np.abs(got_onnx - want).max()), float(np.abs(got_dynamo - want).max()))

    t_onnx, t_dynamo = [], []
    with torch.no_grad():
        for _ in range(repeat):
            t0 = time.perf_counter()
            via_onnx(*arrays)
            t_onnx.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            fast(*args)
            t_dynamo.append(time.perf_counter() - t0)
    row = dict(name=name, onnx_compile_s=onnx_s, dynamo_compile_s=dynamo_s, err=err,
               onnx_ms=1e3 * statistics.median(t_onnx), dynamo_ms=1e3 * statistics.median(t_dynamo))
    row["ratio"] = row["dynamo_ms"] / row["onnx_ms"]
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="dqn,resnet18")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--target", default="c -mcpu=native")
    opts = ap.parse_args(argv)
    rows = []
    for name in opts.models.split(","):
        row = bench(name, opts.repeat, opts.target)
        rows.append(row)
        print(f"{name:15s} compile onnx {row['onnx_compile_s']:6.1f} s dynamo {row['dynamo_compile_s']:6.1f} s  "
              f"onnx {row['onnx_ms']:9.2f} ms  torch.compile {row['dynamo_ms']:9.2f} ms  "
              f"ratio {row['ratio']:.3f}  max err {row['err']:.1e}", flush=True)
    print("| model | through ONNX ms (1T) | torch.compile ms (1T) | torch.compile/ONNX |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['onnx_ms']:.2f} | {r['dynamo_ms']:.2f} | {r['ratio']:.3f} |")


if __name__ == "__main__":
    main()

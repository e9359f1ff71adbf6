"""Where the time of a torch.compile(model, backend="tensorforge") call goes, beside the same model
through ONNX, at one thread: the diagnostics behind benchmarks/results/torch_compile.txt.

    python benchmarks/torch_compile_costs.py [--models dqn,mobilenet_v1] [--repeat 40] [--target "c -mcpu=native"]

The workloads and both paths are benchmarks/torch_compile.py's.  Per model, the calls of the two
paths alternate (each call follows the other path's run, as torch_compile.py times them), and the
medians of the calling thread's CPU time are printed in microseconds:

  onnx, torch.compile  a whole call of each path
  dynamo in            from the call to the start of the backend's function: dynamo's guards, its
                       gathering of the parameters as arguments, its frames
  weights              the backend's check that the baked-in weights are still current
  convert              the rest of the backend's function: torch tensors to NumPy arrays and back
                       (no copies), the output tuple
  model                the compiled model (tensorforge's executor and kernels)
  dynamo out           from the backend's return until the call has returned and the caller has
                       dropped the output tensor
  faults               minor page faults per call of each path (getrusage)

The backend's parts are timed by wrapping the compiled graph's own methods, so the code timed is
the backend's.  Then dynamo's cost alone (torch_compile.py's constant backend: outputs computed once,
nothing of tensorforge's runs per call): hot, called in a loop, and right after NumPy has summed
1, 4, 16 or 64 MB (which evicts that much from the caches, as a model's run streaming its weights
does).  The growth from hot to 64 MB is the cost of dynamo's guards and frames missing the caches.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
import warnings

import numpy as np

SWEEPS_MB = (1, 4, 16, 64)


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class _Clock:
    """Timestamps and durations of the backend's parts during one torch.compile call."""

    def __init__(self):
        self.parts: dict[str, list] = {k: [] for k in ("dynamo in", "weights", "convert", "model", "dynamo out")}
        self.entered = self.left = self.weights = self.model = 0

    def wrap(self, compiled) -> object:
        """`compiled` (a CompiledGraph) with its function, its current variant's weight check
        and its model timed; the code that runs is theirs."""
        variant = compiled._last
        check, model = variant.stale, variant.model

        def timed_check(args):
            start = time.thread_time_ns()
            try:
                return check(args)
            finally:
                self.weights = time.thread_time_ns() - start

        def timed_model(*arrays):
            start = time.thread_time_ns()
            try:
                return model(*arrays)
            finally:
                self.model = time.thread_time_ns() - start

        variant.stale, variant.model = timed_check, timed_model

        def call(*args):
            self.entered = time.thread_time_ns()
            try:
                return compiled(*args)
            finally:
                self.left = time.thread_time_ns()
        return call

    def record(self, start: int, end: int) -> None:
        inside = self.left - self.entered
        self.parts["dynamo in"].append(self.entered - start)
        self.parts["weights"].append(self.weights)
        self.parts["model"].append(self.model)
        self.parts["convert"].append(inside - self.weights - self.model)
        self.parts["dynamo out"].append(end - self.left)


def _median_us(values: list) -> float:
    return statistics.median(values) / 1e3


def costs(name: str, repeat: int, target: str) -> dict:
    import torch
    import torch_compile as bench  # noqa: E402  (benchmarks/ is on sys.path when this file runs as a script)

    import tensorforge.frontend.torch_dynamo as tf_dynamo
    from tensorforge.runtime.module import set_num_threads
    torch.set_num_threads(1)
    set_num_threads(1)
    module, feeds, output_names = bench._workload(bench._models(), name)
    args = tuple(torch.from_numpy(a) for a in feeds.values())
    path, tensorforge, from_onnx = bench._onnx_path(torch, module, feeds, output_names, name)
    via_onnx = tensorforge.compile(from_onnx(path), target=target)
    arrays = [a.numpy() for a in args]
    clock = _Clock()

    def backend(gm, example_inputs, options=None):
        compiled = tf_dynamo.tensorforge_backend(gm, example_inputs, options)
        if not isinstance(compiled, tf_dynamo.CompiledGraph):
            raise SystemExit(f"{name}: a graph runs in eager PyTorch; nothing of tensorforge's to time")
        return clock.wrap(compiled)

    torch._dynamo.reset()
    whole = {"onnx": [], "torch.compile": []}
    faults = {"onnx": [], "torch.compile": []}
    with bench._dynamo_settings(False), torch.no_grad():
        fast = torch.compile(module, backend=backend, options={"target": target})
        fast(*args)
        for _ in range(repeat):
            f0, t0 = _faults(), time.thread_time_ns()
            via_onnx(*arrays)
            t1, f1 = time.thread_time_ns(), _faults()
            whole["onnx"].append(t1 - t0)
            faults["onnx"].append(f1 - f0)
            f0, t0 = _faults(), time.thread_time_ns()
            fast(*args)             # the output tensor is dropped here, inside the timed span
            t1, f1 = time.thread_time_ns(), _faults()
            whole["torch.compile"].append(t1 - t0)
            faults["torch.compile"].append(f1 - f0)
            clock.record(t0, t1)
    row = {k: _median_us(v) for k, v in whole.items()}
    row.update({k: _median_us(v) for k, v in clock.parts.items()})
    row.update({f"faults {k}": statistics.median(v) for k, v in faults.items()})
    row.update(_dynamo_alone(torch, bench, module, args, repeat))
    torch._dynamo.reset()
    return row


def _dynamo_alone(torch, bench, module, args, repeat: int) -> dict:
    """Microseconds per call of `module` compiled with the constant backend: hot, and right after
    each cache sweep."""
    torch._dynamo.reset()
    out = {}
    with bench._dynamo_settings(False), torch.no_grad():
        constant = torch.compile(module, backend=bench._constant_backend)
        constant(*args)
        for mb in (0, *SWEEPS_MB):
            sweep = np.ones(mb * 2**20 // 4, np.float32) if mb else None
            times = []
            for _ in range(repeat):
                if sweep is not None:
                    sweep.sum()
                start = time.thread_time_ns()
                constant(*args)
                times.append(time.thread_time_ns() - start)
            out[f"alone {mb} MB" if mb else "alone hot"] = _median_us(times)
    torch._dynamo.reset()
    return out


COLUMNS = ("onnx", "torch.compile", "dynamo in", "weights", "convert", "model", "dynamo out",
           "faults onnx", "faults torch.compile", "alone hot", *(f"alone {mb} MB" for mb in SWEEPS_MB))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="dqn,mobilenet_v1")
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--target", default="c -mcpu=native")
    opts = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    print("| model | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|", flush=True)
    for name in opts.models.split(","):
        row = costs(name, opts.repeat, opts.target)
        print(f"| {name} | " + " | ".join(f"{row[c]:.0f}" if c.startswith("faults") else f"{row[c]:.1f}"
                                          for c in COLUMNS) + " |", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("(microseconds of the calling thread's CPU time, medians; faults: minor page faults per call)")


if __name__ == "__main__":
    main()

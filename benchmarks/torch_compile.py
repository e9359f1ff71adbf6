"""torch.compile(model, backend="tensorforge") against the same model through ONNX
(torch.onnx.export, then tensorforge.frontend.from_onnx and compile), at one thread.

    python benchmarks/torch_compile.py [--models dqn,resnet18] [--repeat 20] [--target "c -mcpu=native"]
                                       [--block 1] [--lean-guards] [--skip-guard-eval-unsafe]

The modules are benchmarks/exports/models.py's (the paper's workloads as torch.nn modules) and
nn_transformer_encoder (nn.TransformerEncoder with BERT-small's sizes).
Both paths compile for the same target and run with one thread (tensorforge's runtime and
PyTorch's), under torch.no_grad(); their calls are interleaved so that a busy machine slows both
alike: one of each per round, or with --block N, N calls of one path, then N of the other (a
model called over and over, as in serving, finds its own data and dynamo's guards in the caches;
a call right after the other path's does not).  Each path's output is checked against eager PyTorch before it is
timed.  Printed: compile seconds of each path, the median ms per call, and the ratio dynamo/ONNX
(below 1: the torch.compile path is faster), each as wall-clock time and as the CPU time of the
calling thread (which leaves out waits for a core on a busy machine).

Where the torch.compile call's time goes is measured afterwards: the module compiled again with
the same backend, its function's CPU time taken from inside ("backend": tensorforge's per-call
work and the compiled model), the rest of the call being dynamo's ("dynamo": its guards,
gathering the parameters, its frame around the backend's function), the calls interleaved with
the ONNX path's as before.  And dynamo's cost alone ("dynamo alone"): the module compiled with a
backend whose function returns the outputs it computed once at compile time (nothing of
tensorforge's runs), each call right after a call of the ONNX path (with --block too: a real
torch.compile call always follows a model's run, its own or the other path's).  "bound" is the CPU
ratio torch.compile/ONNX that a backend costing exactly what the ONNX path costs would reach:
(ONNX + dynamo alone) / ONNX.  Dynamo's guards and its frame touch thousands of Python and C++
objects per call, and after a model has streamed its weights through the caches they are cache
misses: its cost per call is several times larger here than in a loop of calls that run no model.
--lean-guards compiles with dynamo's install_free_tensors and
use_recursive_dict_tags_for_guards settings, which shrink dynamo's part; --skip-guard-eval-unsafe
times the calls under torch.compiler.set_stance(skip_guard_eval_unsafe=True).  Dynamo runs with
allow_rnn (by default it leaves a module with an nn.LSTM to eager PyTorch).  A graph that
torch.compile would leave to eager PyTorch stops the benchmark.  Export uses the TorchScript
exporter (dynamo=False), which needs no onnxscript.
"""
from __future__ import annotations

import argparse
import contextlib
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


# nn.TransformerEncoder itself (bert_encoder is written out layer by layer): BERT-small's sizes,
# batch-first, in eval mode; under no_grad eager PyTorch runs its fused fast path
ENCODER_SEQ, ENCODER_WIDTH, ENCODER_HEADS, ENCODER_FFN, ENCODER_LAYERS = 128, 256, 4, 1024, 4


def _workload(models, name: str) -> tuple:
    """(module in eval mode, {input name: array}, output names) of a workload of
    benchmarks/exports/models.py or of nn_transformer_encoder."""
    import torch
    from torch import nn
    if name != "nn_transformer_encoder":
        module, feeds = models.get(name, seed=0)
        return module, feeds, models.output_names(name)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(ENCODER_WIDTH, ENCODER_HEADS, ENCODER_FFN, batch_first=True)
    module = nn.TransformerEncoder(layer, ENCODER_LAYERS, enable_nested_tensor=False).eval()
    src = np.random.default_rng(0).normal(0.0, 1.0, size=(1, ENCODER_SEQ, ENCODER_WIDTH)).astype(np.float32)
    return module, {"src": src}, ["hidden_states"]


def _onnx_path(torch, module, feeds: dict, output_names: list, name: str) -> tuple:
    import tensorforge
    from tensorforge.frontend import from_onnx
    path = os.path.join(tempfile.mkdtemp(), f"{name}.onnx")
    args = tuple(torch.from_numpy(a) for a in feeds.values())
    with warnings.catch_warnings(), redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, input_names=list(feeds), output_names=output_names, dynamo=False)
    return path, tensorforge, from_onnx


def _timed_backend(spent: list):
    """The tensorforge backend with its function's CPU time per call appended to `spent`."""
    import tensorforge.frontend.torch_dynamo as tf_dynamo

    def backend(gm, example_inputs, options=None):
        compiled = tf_dynamo.tensorforge_backend(gm, example_inputs, options)

        def call(*args):
            start = time.thread_time_ns()
            out = compiled(*args)
            spent.append(time.thread_time_ns() - start)
            return out
        return call
    return backend


def _constant_backend(gm, example_inputs, options=None):
    """A backend that runs the graph once, now, and returns a function that gives those outputs
    back on every call: what remains of a call is dynamo's own work."""
    outputs = gm(*example_inputs)
    return lambda *args: outputs


def _dynamo_alone(module, via_onnx, args, arrays, repeat: int, lean: bool, skip_guards: bool) -> float:
    """Median CPU seconds of a call of `module` compiled with `_constant_backend`, each right after
    a call of the ONNX path: a constant backend runs no model, so calls of it in a row would find
    dynamo's objects in the caches, which the real calls never do."""
    import torch
    torch._dynamo.reset()
    with _dynamo_settings(lean), torch.no_grad():
        constant = torch.compile(module, backend=_constant_backend)
        constant(*args)
        with _stance(skip_guards):
            times = _interleaved(lambda: via_onnx(*arrays), lambda: constant(*args), repeat, 1)
    torch._dynamo.reset()
    return times["cpu", 1]


def _split(fast, via_onnx, args, arrays, spent: list, repeat: int, block: int) -> tuple[float, float]:
    """Median CPU seconds per call inside the backend's functions and outside them (dynamo),
    interleaved with the ONNX path's calls as in `_interleaved`."""
    inside, outside = [], []
    for _ in range(max(1, repeat // block)):
        for _ in range(block):
            via_onnx(*arrays)
        for _ in range(block):
            spent.clear()
            start = time.thread_time_ns()
            fast(*args)
            total = time.thread_time_ns() - start
            inside.append(sum(spent))
            outside.append(total - sum(spent))
    return 1e-9 * statistics.median(inside), 1e-9 * statistics.median(outside)


def _dynamo_settings(lean: bool):
    """allow_rnn (without it dynamo hands no graph with an nn.LSTM to any backend), and with
    `lean` the settings that shrink dynamo's guards."""
    import torch
    lean_settings = dict(install_free_tensors=True, use_recursive_dict_tags_for_guards=True) if lean else {}
    return torch._dynamo.config.patch(allow_rnn=True, **lean_settings)


def _stance(skip_guards: bool):
    """torch.compiler.set_stance(skip_guard_eval_unsafe=True) when `skip_guards`: dynamo then
    checks only the guards that tell its compiled graphs apart (none for a single graph)."""
    import torch
    return torch.compiler.set_stance(skip_guard_eval_unsafe=True) if skip_guards else contextlib.nullcontext()


def _compiled_graphs() -> int:
    """How many graphs dynamo handed to a backend since its counters were last cleared."""
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


def _interleaved(first, second, repeat: int, block: int = 1) -> dict:
    """Median seconds per call of two functions called alternately, `block` calls of one, then
    `block` of the other: wall-clock ("wall") and the CPU time of this thread ("cpu"; both paths
    run on this one thread, and on a busy machine it leaves out the time the thread waits for a
    core)."""
    times: dict = {("wall", 0): [], ("wall", 1): [], ("cpu", 0): [], ("cpu", 1): []}
    for _ in range(max(1, repeat // block)):
        for k, fn in enumerate((first, second)):
            for _ in range(block):
                w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                fn()
                c1, w1 = time.thread_time_ns(), time.perf_counter_ns()
                times["wall", k].append(w1 - w0)
                times["cpu", k].append(c1 - c0)
    return {key: 1e-9 * statistics.median(v) for key, v in times.items()}


def bench(name: str, repeat: int, target: str, lean: bool = False, block: int = 1,
          skip_guards: bool = False) -> dict:
    import torch

    import tensorforge.frontend.torch_dynamo as tf_dynamo
    from tensorforge.runtime.module import set_num_threads
    models = _models()
    torch.set_num_threads(1)
    set_num_threads(1)
    module, feeds, output_names = _workload(models, name)
    args = tuple(torch.from_numpy(a) for a in feeds.values())
    with torch.no_grad():
        want = module(*args).numpy()

    t0 = time.perf_counter()
    path, tensorforge, from_onnx = _onnx_path(torch, module, feeds, output_names, name)
    via_onnx = tensorforge.compile(from_onnx(path), target=target)
    onnx_s = time.perf_counter() - t0
    arrays = [a.numpy() for a in args]

    tf_dynamo.register()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    t0 = time.perf_counter()
    with _dynamo_settings(lean), torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast = torch.compile(module, backend="tensorforge", options={"target": target})
        got_dynamo = fast(*args).numpy()
        fast_graphs = _compiled_graphs()
    dynamo_s = time.perf_counter() - t0
    fallbacks = [str(w.message) for w in caught if "runs in eager PyTorch" in str(w.message)]
    if fallbacks:   # a timing of eager PyTorch would be reported as tensorforge's
        raise SystemExit(f"{name}: {fallbacks[0]}")
    if not fast_graphs:
        raise SystemExit(f"{name}: dynamo handed no graph to the backend (the module runs in eager PyTorch)")
    got_onnx = via_onnx(*arrays)[0]
    err = max(float(np.abs(got_onnx - want).max()), float(np.abs(got_dynamo - want).max()))

    with torch.no_grad(), _stance(skip_guards):
        timed = _interleaved(lambda: via_onnx(*arrays), lambda: fast(*args), repeat, block)
    # where the torch.compile call's time goes: the same backend, its function timed from inside
    torch._dynamo.reset()
    spent: list = []
    with _dynamo_settings(lean), torch.no_grad():
        split = torch.compile(module, backend=_timed_backend(spent), options={"target": target})
        split(*args)
        with _stance(skip_guards):
            inside, outside = _split(split, via_onnx, args, arrays, spent, repeat, block)
    alone = _dynamo_alone(module, via_onnx, args, arrays, repeat, lean, skip_guards)
    row = dict(name=name, onnx_compile_s=onnx_s, dynamo_compile_s=dynamo_s, err=err,
               onnx_ms=1e3 * timed["wall", 0], dynamo_ms=1e3 * timed["wall", 1],
               onnx_cpu_ms=1e3 * timed["cpu", 0], dynamo_cpu_ms=1e3 * timed["cpu", 1],
               inside_cpu_ms=1e3 * inside, outside_cpu_ms=1e3 * outside, alone_cpu_ms=1e3 * alone)
    row["ratio"] = row["dynamo_ms"] / row["onnx_ms"]
    row["cpu_ratio"] = row["dynamo_cpu_ms"] / row["onnx_cpu_ms"]
    row["inside_ratio"] = row["inside_cpu_ms"] / row["onnx_cpu_ms"]
    row["bound"] = (row["onnx_cpu_ms"] + row["alone_cpu_ms"]) / row["onnx_cpu_ms"]
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="dqn,resnet18")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--target", default="c -mcpu=native")
    ap.add_argument("--block", type=int, default=1,
                    help="calls of one path in a row before switching (1: every call follows the other "
                         "path's, with cold caches; 10: most calls follow a call of the same model)")
    ap.add_argument("--skip-guard-eval-unsafe", action="store_true",
                    help="time the calls under torch.compiler.set_stance(skip_guard_eval_unsafe=True)")
    ap.add_argument("--lean-guards", action="store_true",
                    help="compile with dynamo's install_free_tensors and use_recursive_dict_tags_for_guards")
    opts = ap.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rows = []
    for name in opts.models.split(","):
        row = bench(name, opts.repeat, opts.target, opts.lean_guards, opts.block, opts.skip_guard_eval_unsafe)
        rows.append(row)
        print(f"{name:15s} compile onnx {row['onnx_compile_s']:6.1f} s dynamo {row['dynamo_compile_s']:6.1f} s  "
              f"wall: onnx {row['onnx_ms']:8.3f} ms  torch.compile {row['dynamo_ms']:8.3f} ms  "
              f"ratio {row['ratio']:.3f}  cpu: onnx {row['onnx_cpu_ms']:8.3f} ms  "
              f"torch.compile {row['dynamo_cpu_ms']:8.3f} ms  ratio {row['cpu_ratio']:.3f}  "
              f"backend {row['inside_cpu_ms']:8.3f} ms  dynamo {row['outside_cpu_ms']:6.3f} ms  "
              f"dynamo alone {row['alone_cpu_ms']:6.3f} ms  bound {row['bound']:.3f}  max err {row['err']:.1e}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| model | ONNX ms | torch.compile ms | ratio | CPU ms ONNX | CPU ms torch.compile | CPU ratio "
          "| CPU ms in the backend | CPU ms in dynamo | backend/ONNX (CPU) | CPU ms dynamo alone | bound |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['onnx_ms']:.3f} | {r['dynamo_ms']:.3f} | {r['ratio']:.3f} | {r['onnx_cpu_ms']:.3f} "
              f"| {r['dynamo_cpu_ms']:.3f} | {r['cpu_ratio']:.3f} | {r['inside_cpu_ms']:.3f} "
              f"| {r['outside_cpu_ms']:.3f} | {r['inside_ratio']:.3f} | {r['alone_cpu_ms']:.3f} | {r['bound']:.3f} |")


if __name__ == "__main__":
    main()

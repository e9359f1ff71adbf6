"""torch.compile(model, backend="tensorforge") against the same model through ONNX
(torch.onnx.export, then tensorforge.frontend.from_onnx and compile), at one thread.

    python benchmarks/torch_compile.py [--models dqn,resnet18] [--repeat 20] [--target "c -mcpu=native"]
                                       [--lean-guards]

The modules are benchmarks/exports/models.py's (the paper's workloads as torch.nn modules) and
nn_transformer_encoder (nn.TransformerEncoder with BERT-small's sizes).
Both paths compile for the same target and run with one thread (tensorforge's runtime and
PyTorch's), under torch.no_grad(); their calls are interleaved (one of each per round) so that a
busy machine slows both alike.  Each path's output is checked against eager PyTorch before it is
timed.  Printed: compile seconds of each path, the median ms per call, and the ratio dynamo/ONNX
(below 1: the torch.compile path is faster).

Dynamo's own cost per call (guards, gathering the parameters, its frame around the backend's
function) is measured the same way afterwards: the module compiled with a backend whose function
returns a precomputed output, interleaved with the ONNX path (so that its caches are as cold as
in the real call).  Dynamo runs with allow_rnn (by default it leaves a module with an nn.LSTM
to eager PyTorch).  "less dynamo" is the torch.compile time minus that cost.  --lean-guards
compiles with dynamo's install_free_tensors and use_recursive_dict_tags_for_guards settings,
which shrink that cost.  A graph that torch.compile would leave to eager PyTorch stops the
benchmark.  Export uses the TorchScript exporter (dynamo=False), which needs no onnxscript.
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


def _constant_backend(gm, example_inputs, options=None):
    """A dynamo backend whose function returns the graph's outputs computed once: timing it
    times dynamo alone."""
    outputs = gm(*example_inputs)
    return lambda *args: outputs


def _dynamo_settings(lean: bool):
    """allow_rnn (without it dynamo hands no graph with an nn.LSTM to any backend), and with
    `lean` the settings that shrink dynamo's guards."""
    import torch
    lean_settings = dict(install_free_tensors=True, use_recursive_dict_tags_for_guards=True) if lean else {}
    return torch._dynamo.config.patch(allow_rnn=True, **lean_settings)


def _compiled_graphs() -> int:
    """How many graphs dynamo handed to a backend since its counters were last cleared."""
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


def _interleaved(first, second, repeat: int) -> tuple[float, float]:
    """Median seconds per call of two functions called alternately."""
    t_first, t_second = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        first()
        t_first.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        second()
        t_second.append(time.perf_counter() - t0)
    return statistics.median(t_first), statistics.median(t_second)


def bench(name: str, repeat: int, target: str, lean: bool = False) -> dict:
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

    with torch.no_grad():
        t_onnx, t_dynamo = _interleaved(lambda: via_onnx(*arrays), lambda: fast(*args), repeat)
    torch._dynamo.reset()
    with _dynamo_settings(lean), torch.no_grad():
        alone = torch.compile(module, backend=_constant_backend)
        alone(*args)
    with torch.no_grad():
        _, t_alone = _interleaved(lambda: via_onnx(*arrays), lambda: alone(*args), repeat)
    torch._dynamo.reset()
    row = dict(name=name, onnx_compile_s=onnx_s, dynamo_compile_s=dynamo_s, err=err,
               onnx_ms=1e3 * t_onnx, dynamo_ms=1e3 * t_dynamo, guard_ms=1e3 * t_alone)
    row["ratio"] = row["dynamo_ms"] / row["onnx_ms"]
    row["ratio_less_dynamo"] = (row["dynamo_ms"] - row["guard_ms"]) / row["onnx_ms"]
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="dqn,resnet18")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--target", default="c -mcpu=native")
    ap.add_argument("--lean-guards", action="store_true",
                    help="compile with dynamo's install_free_tensors and use_recursive_dict_tags_for_guards")
    opts = ap.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rows = []
    for name in opts.models.split(","):
        row = bench(name, opts.repeat, opts.target, opts.lean_guards)
        rows.append(row)
        print(f"{name:15s} compile onnx {row['onnx_compile_s']:6.1f} s dynamo {row['dynamo_compile_s']:6.1f} s  "
              f"onnx {row['onnx_ms']:9.3f} ms  torch.compile {row['dynamo_ms']:9.3f} ms  "
              f"dynamo alone {row['guard_ms']:7.3f} ms  ratio {row['ratio']:.3f}  max err {row['err']:.1e}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| model | through ONNX ms (1T) | torch.compile ms (1T) | torch.compile/ONNX | dynamo alone ms "
          "| torch.compile less dynamo / ONNX |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['onnx_ms']:.3f} | {r['dynamo_ms']:.3f} | {r['ratio']:.3f} | {r['guard_ms']:.3f} "
              f"| {r['ratio_less_dynamo']:.3f} |")


if __name__ == "__main__":
    main()

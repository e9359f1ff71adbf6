"""Whole models: tensorforge (default schedules) against ONNX Runtime and PyTorch, interleaved in
one run, batch 1, with 1 thread (and 2 with --threads 1,2).  Prints compile times, median
latencies, the ratios tensorforge / ONNX Runtime and tensorforge / PyTorch, and tensorforge's
share of the machine's FMA peak per model, then their geometric means and a summary table.

    python benchmarks/e2e.py [--models resnet18,mobilenet_v1] [--repeat 20] [--threads 1,2]
    python benchmarks/e2e.py --onnx DIR            # every DIR/NAME.onnx with DIR/NAME.npz
                                                   # (benchmarks/real_cases.py makes one of real models)
    python benchmarks/e2e.py --tuned [DIR]         # also: each model compiled with DIR/MODEL.jsonl
    python benchmarks/e2e.py --omp-wait-policy PASSIVE   # as under OMP_WAIT_POLICY=PASSIVE

Models.  Without --onnx: the zoo (tensorforge.testing.models), graphs built node by node.  With
--onnx DIR: every NAME.onnx in DIR that has a NAME.npz beside it (its arrays are the inputs, by
name), e.g. the exports of benchmarks/exports/export.py, which are the paper's workloads as
torch.onnx.export writes them from plain torch.nn modules; --models then picks among the names.

Peak.  benchmarks/_peak.py measures the fp32 FMA peak for each thread count (and the FMA units
per core) first, and again before each model and at the end, keeping the best (a busy moment
only lowers a peak); a model's "peak" column is its counted flops (benchmarks/_flops.py: convs,
dense, matmul, the LSTM's GEMMs) per tensorforge's median latency over the best peak so far at
that thread count, and the closing table uses the best peak of the whole run.

With --tuned, each model is also compiled with the tuning records in DIR (default
benchmarks/records/, made by `tensorforge tune MODEL --time-budget ... --records DIR/MODEL.jsonl`)
and timed in the same interleaved blocks; `tuned` is its latency and `tuned/ort` its ratio.  It
is compiled once per thread count, with that count set: compile applies only the records
measured with the thread count it runs with, so records tuned with 1 thread leave the 2-thread
"tuned" model at its defaults.

PyTorch.  For a file exported by benchmarks/exports/export.py, benchmarks/plain_torch.py or
benchmarks/architectures.py (its metadata names the workload; the last needs `transformers`), the
peer is the very torch.nn module that was exported; otherwise the ONNX graph rebuilt with
PyTorch ops (benchmarks/torch_peer.py), which covers the zoo's ops and what exporters write
around them in real models (for a file with other ops, such as If, the column says n/a and
why).  It runs under torch.inference_mode() with torch.set_num_threads(threads); per
model and thread count it uses the fastest of eager, torch.jit.freeze and
torch.jit.optimize_for_inference (for CNNs also each in channels_last memory order) that agrees
with eager, and names it in the torch column.  Its output is checked against ONNX Runtime before
timing.  Without PyTorch the column says n/a.

Timing.  Per model and thread count, three rounds; in each, every peer is timed in a block of
repeat / 3 calls (at least as many as fill MIN_BLOCK_S, for fast models) after 0.1 s of untimed
calls, the order rotated between rounds; a peer's latency is the median of its three block
medians.

OpenMP.  --omp-wait-policy sets OMP_WAIT_POLICY for the whole process before any OpenMP runtime
loads, as a user's environment would.  It reaches PyTorch's libgomp; tensorforge's kernels run
on tensorforge's own thread pool (tensorforge/runtime/thread_pool.py), which it does not affect.
Without it PyTorch's workers spin about 0.1 ms, then sleep (GOMP_SPINCOUNT=3000, see
import_torch_peer).
"""
from __future__ import annotations

import argparse
import functools
import math
import os
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent


# each timed block has at least the calls that fill this many seconds (a DQN of 0.08 ms: 250)
MIN_BLOCK_S = 0.02


def median_ms(fn, repeat: int) -> float:
    from tensorforge.testing.timing import median_seconds
    return median_seconds(fn, repeat, warmup_s=0.1, min_block_s=MIN_BLOCK_S) * 1e3


def import_torch_peer():
    """benchmarks/torch_peer.py, or None when PyTorch is not installed (its column says n/a).

    PyTorch's libgomp spins about 0.2 s after each parallel region by default, which in this
    interleaved benchmark would take the cores from the library timed next; unless the
    environment or --omp-wait-policy chose a policy, its workers spin briefly
    (GOMP_SPINCOUNT=3000, about 0.1 ms) and then sleep.  tensorforge's own kernels do not read
    these settings (tensorforge/runtime/thread_pool.py)."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = "3000"
    try:
        import torch_peer  # noqa: E402  (benchmarks/ is on sys.path when this file runs as a script)
    except ImportError:
        return None
    return torch_peer


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


@dataclass
class Entry:
    """One model to run: its ONNX graph, example inputs, and how to get its PyTorch peer
    (a callable returning torch_peer.Variants; it raises to say why there is none)."""
    name: str
    proto: object
    feeds: dict
    torch_variants: Callable | None


def zoo_entries(names: list[str] | None, torch_peer) -> list[Entry]:
    from tensorforge.testing import models

    out = []
    for name in names or models.NAMES:
        proto, feeds = models.get(name)
        build = (lambda p=proto, f=feeds: torch_peer.variants(p, f)) if torch_peer else None
        out.append(Entry(name, proto, feeds, build))
    return out


def _export_module(proto):
    """(workload name, seed) from the metadata benchmarks/exports/export.py writes, or None."""
    meta = {p.key: p.value for p in proto.metadata_props}
    name = meta.get("tensorforge.benchmarks.workload")
    return (name, int(meta.get("tensorforge.benchmarks.seed", "0"))) if name else None


def onnx_entries(folder: str, names: list[str] | None, torch_peer) -> list[Entry]:
    """Every NAME.onnx of `folder` with a NAME.npz beside it (or the `names` among them)."""
    import onnx

    root = Path(folder)
    if not root.is_dir():
        raise SystemExit(f"--onnx {folder}: no such folder (make one with benchmarks/exports/export.py)")
    found = sorted(p.stem for p in root.glob("*.onnx") if p.with_suffix(".npz").exists())
    if names:
        missing = [n for n in names if n not in found]
        if missing:
            raise SystemExit(f"--onnx {folder}: no NAME.onnx with NAME.npz for {', '.join(missing)}; "
                             f"it has {', '.join(found) or 'none'}")
        found = [n for n in names]
    if not found:
        raise SystemExit(f"--onnx {folder}: no NAME.onnx with a NAME.npz beside it")
    out = []
    for name in found:
        proto = onnx.load(str(root / f"{name}.onnx"))
        with np.load(root / f"{name}.npz") as data:
            feeds = {k: data[k] for k in data.files}
        build = None
        if torch_peer is not None:
            build = (lambda p=proto, f=feeds: _peer_of_export(p, f, torch_peer))
        out.append(Entry(name, proto, feeds, build))
    return out


def _peer_of_export(proto, feeds, torch_peer):
    """The exported torch.nn module itself when the file names a workload of
    benchmarks/exports/models.py; else the ONNX graph rebuilt by torch_peer."""
    origin = _export_module(proto)
    if origin is None:
        return torch_peer.variants(proto, feeds)
    sys.path.insert(0, str(HERE / "exports"))
    if origin[0].startswith("plain_torch:"):
        import plain_torch  # noqa: E402  (benchmarks/plain_torch.py; benchmarks/ is on sys.path)

        module, example = plain_torch.get(origin[0].split(":", 1)[1], origin[1])
        return torch_peer.module_variants(module, [feeds[n] for n in example])
    if origin[0].startswith("architectures:"):
        import architectures  # noqa: E402  (benchmarks/architectures.py: needs transformers)

        module, _, names = architectures.get(origin[0].split(":", 1)[1])
        with warnings.catch_warnings():     # transformers' deprecation notes while tracing
            warnings.simplefilter("ignore", FutureWarning)
            return torch_peer.module_variants(module, [feeds[n] for n in names])
    import models as export_models  # noqa: E402  (benchmarks/exports/models.py)

    module, _ = export_models.get(*origin)
    return torch_peer.module_variants(module, [feeds[n] for n in export_models.input_names(origin[0])])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=None, help="comma-separated names (default: all)")
    ap.add_argument("--onnx", metavar="DIR", help="run DIR/NAME.onnx with DIR/NAME.npz instead of the zoo")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", default="1")
    ap.add_argument("--omp-wait-policy", choices=("ACTIVE", "PASSIVE"),
                    help="set OMP_WAIT_POLICY for the whole process before OpenMP loads")
    ap.add_argument("--tuned", nargs="?", const=str(HERE / "records"),
                    help="also time each model compiled with DIR/MODEL.jsonl (default DIR: benchmarks/records)")
    opts = ap.parse_args()
    if opts.omp_wait_policy:
        os.environ["OMP_WAIT_POLICY"] = opts.omp_wait_policy     # before any OpenMP runtime loads
    thread_counts = [int(t) for t in opts.threads.split(",")]
    names = [n.strip() for n in opts.models.split(",") if n.strip()] if opts.models else None

    import _peak  # noqa: E402  (benchmarks/ is on sys.path when this file runs as a script)
    import onnxruntime as ort
    torch_peer = import_torch_peer()
    torch = torch_peer.torch if torch_peer else None
    print(f"onnxruntime {ort.__version__}, "
          + (f"torch {torch.__version__}" if torch else "torch not installed (its column says n/a)")
          + f", OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}", flush=True)
    peak = _peak.measure(thread_counts)
    print(peak.describe(), flush=True)
    if _peak.scaling_warning(peak):
        print(_peak.scaling_warning(peak), flush=True)
    entries = onnx_entries(opts.onnx, names, torch_peer) if opts.onnx else zoo_entries(names, torch_peer)
    rows, failed = [], []
    for k, entry in enumerate(entries):
        if k:   # measured again before each model; the best so far counts (see FmaPeak.merged)
            peak = peak.merged(_peak.measure(thread_counts))
        try:
            rows += run_entry(entry, thread_counts, opts, peak, torch_peer)
        except Exception as err:    # one model's failure is reported; the others still run
            why = f"{type(err).__name__}: {err}".splitlines()[0][:300]
            print(f"{entry.name}: FAILED ({why})", flush=True)
            failed.append(entry.name)
    peak = peak.merged(_peak.measure(thread_counts))
    print(f"best over the run: {peak.describe()}")
    if rows:
        summarize(rows, peak)
    if failed:
        print(f"failed: {', '.join(failed)} (left out of the means)")
        sys.exit(1)


def _check_against(got: list, ref: list, who: str) -> float:
    """The largest absolute difference from ONNX Runtime's outputs; AssertionError beyond
    rtol/atol 1e-3."""
    err = max(float(np.max(np.abs(a - b))) for a, b in zip(got, ref))
    assert all(np.allclose(a, b, rtol=1e-3, atol=1e-3) for a, b in zip(got, ref)), \
        f"{who} differs from ONNX Runtime (max|diff| {err:.1e})"
    return err


def run_entry(entry: Entry, thread_counts: list[int], opts, peak, torch_peer) -> list[dict]:
    """Compile one model, then per thread count time it interleaved with its peers; one row each."""
    import _flops
    import onnxruntime as ort

    import tensorforge
    from tensorforge.frontend import from_onnx
    from tensorforge.graph.ir import Graph
    from tensorforge.runtime.module import set_num_threads

    name, proto, feeds = entry.name, entry.proto, entry.feeds
    torch = torch_peer.torch if torch_peer else None
    t0 = time.perf_counter()
    graph = from_onnx(proto)
    if not isinstance(graph, Graph):     # symbolic dimensions: the static graph at the inputs' shapes
        graph = from_onnx(proto, shapes={n: np.shape(a) for n, a in feeds.items()})
    model = tensorforge.compile(graph, target="c -mcpu=native")
    compile_s = time.perf_counter() - t0
    # a model that stays a program (control flow) runs staged; its flops are not counted (0)
    flops = _flops.graph_flops(graph) if isinstance(graph, Graph) else 0.0
    inputs = [feeds[n] for n in model.input_names]
    records = None
    if opts.tuned:
        records = os.path.join(opts.tuned, f"{name}.jsonl")
        if not os.path.exists(records):
            print(f"{name}: no records at {records}; tuned column skipped", flush=True)
            records = None
    found, why_not = None, None
    if entry.torch_variants is not None:
        try:
            found = entry.torch_variants()
        except (NotImplementedError, RuntimeError, KeyError, ValueError) as err:
            why_not = f"{type(err).__name__}: {err}".splitlines()[0][:160]
            print(f"{name}: no PyTorch peer ({why_not})", flush=True)
    rows = []
    for threads in thread_counts:
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
        ref = sess.run(None, feeds)
        set_num_threads(threads)
        err = _check_against(model(*inputs), ref, f"{name}: tensorforge")
        tuned = None
        if records is not None:
            # compiled with this thread count set: compile applies the records measured with it
            tuned = tensorforge.compile(graph, target="c -mcpu=native", records=records)
            print(f"{name}: records {records} applied to {tuned.info['tuned_groups']} kernel(s) "
                  f"at {threads} thread(s)", flush=True)
            _check_against(tuned(*inputs), ref, f"{name}: the tuned model")
        peer = None
        if found is not None:
            torch.set_num_threads(threads)
            peer = torch_peer.fastest(found)     # the best mode can differ per thread count
            for a, b in zip(peer(*found.inputs), ref):
                np.testing.assert_allclose(a.numpy(), b, rtol=1e-3, atol=1e-3,
                                           err_msg=f"{name}: PyTorch ({peer.mode}) differs from ONNX Runtime")
        each = max(1, opts.repeat // 3)
        runs = {"tf": functools.partial(model, *inputs), "ort": functools.partial(sess.run, None, feeds)}
        if tuned is not None:
            runs["tuned"] = functools.partial(tuned, *inputs)
        if peer is not None:
            runs["torch"] = functools.partial(peer, *found.inputs)
        samples: dict[str, list[float]] = {k: [] for k in runs}
        keys = list(runs)
        for r in range(3):  # interleave so that noise hits all peers; rotate who follows whom,
            # since a model that runs right after another finds its weights evicted by that one's
            for k in keys[r % len(keys):] + keys[:r % len(keys)]:
                samples[k].append(median_ms(runs[k], each))
        med = {k: statistics.median(samples[k]) if k in samples else None for k in ("tf", "ort", "torch", "tuned")}
        tf, ortm, torchm, tunedm = med["tf"], med["ort"], med["torch"], med["tuned"]
        share = flops / (tf * 1e-3) / 1e9 / peak.gflops[threads]
        row = dict(name=name, threads=threads, compile_s=compile_s, tf=tf, ort=ortm, torch=torchm,
                   tuned=tunedm, flops=flops, share=share, peak=peak.gflops[threads], err=err,
                   mode=peer.mode if peer else None)
        rows.append(row)
        torch_text = (f"{'torch (' + peer.mode + ')':40s} {torchm:8.2f} ms  tf/torch {tf / torchm:6.2f}"
                      if peer is not None else "torch n/a")
        tuned_text = f"  tuned {tunedm:8.2f} ms  tuned/ort {tunedm / ortm:5.2f}" if tunedm else ""
        print(f"{name:15s} {threads}T compile {compile_s:6.1f} s  tensorforge {tf:9.2f} ms  "
              f"onnxruntime {ortm:8.2f} ms  ratio {tf / ortm:6.2f}  max|diff| {err:.1e}  "
              f"peak {f'{100 * share:5.1f}% ({flops / 1e9:.3f} GFLOP)' if flops else 'n/a (staged)'}  "
              f"{torch_text}{tuned_text}", flush=True)
    return rows


def summarize(rows: list[dict], peak) -> None:
    """Geometric means per thread count, then one markdown table of every row, its share of
    `peak` (the best peak measured over the run)."""
    for threads in sorted({r["threads"] for r in rows}):
        sel = [r for r in rows if r["threads"] == threads]
        print(f"geometric mean ratio tensorforge/onnxruntime, {threads} thread(s): "
              f"{geomean([r['tf'] / r['ort'] for r in sel]):.2f}")
        if all(r["torch"] is not None for r in sel):
            print(f"geometric mean ratio tensorforge/torch, {threads} thread(s): "
                  f"{geomean([r['tf'] / r['torch'] for r in sel]):.2f}")
        tuned_sel = [r for r in sel if r["tuned"] is not None]
        if tuned_sel:
            print(f"geometric mean ratio tuned tensorforge/onnxruntime, {threads} thread(s), "
                  f"{len(tuned_sel)} model(s): {geomean([r['tuned'] / r['ort'] for r in tuned_sel]):.2f} "
                  f"(default on the same models: {geomean([r['tf'] / r['ort'] for r in tuned_sel]):.2f})")
    print()
    print("| model | threads | tensorforge ms | onnxruntime ms | torch ms | tf/ort | tf/torch | GFLOP | "
          "tf GFLOP/s | % of FMA peak |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        torch_ms = f"{r['torch']:.2f}" if r["torch"] is not None else "n/a"
        over_torch = f"{r['tf'] / r['torch']:.2f}" if r["torch"] is not None else "n/a"
        print(f"| {r['name']} | {r['threads']} | {r['tf']:.2f} | {r['ort']:.2f} | {torch_ms} | "
              f"{r['tf'] / r['ort']:.2f} | {over_torch} | {r['flops'] / 1e9:.3f} | "
              f"{r['flops'] / r['tf'] / 1e6:.1f} | {100 * r['flops'] / r['tf'] / 1e6 / peak.gflops[r['threads']]:.1f}% |")


if __name__ == "__main__":
    main()

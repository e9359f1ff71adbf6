"""Symbolic shapes: one model compiled once and called with several shapes, against the same model
compiled for each shape, and against ONNX Runtime on the same file.

    python benchmarks/dynamic_shapes.py [--models resnet18,mobilenet_v1,dqn] [--batches 1,4,16,3,7,12,24]
                                        [--threads 1] [--repeat 20] [--real]

Each workload of benchmarks/exports/models.py is exported by `torch.onnx.export` with a
symbolic batch dimension.  `from_onnx(path)` (no shapes) gives a staged model, compiled once with
`tensorforge.compile` and called with every batch size; `from_onnx(path, shapes=...)` gives a
static model per batch size.  After one first call per shape (which compiles what that batch
size needs) and 20 more (in which a batch size that is not a bucket settles on how it runs),
the three are timed interleaved; the table gives medians and the ratios staged/static (target:
at most 1.2) and staged/ORT, with the machine's FMA peak.  "runs as" gives how the staged model
ran the batch in the end (tensorforge/batch_buckets.py: chunks on the buckets, powers of two up
to 64, like 2+1; a bucket carrying fewer rows, 4[3]; or the batch size's own specialization, 3),
"compiled" the specializations its first call compiled, "first call s" how long that call took
(a batch size whose buckets exist compiles nothing), "later" what the 20 calls compiled.

`--real` also runs the real models with symbolic dimensions that ship in PyPI wheels (an OCR
text detector with a free image size, voice-activity detectors over audio of any length, one
built around an If) when their packages are installed, calling each with several shapes and
comparing every result with ONNX Runtime.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "exports"))


def median_ms(fn, repeat: int) -> float:
    from tensorforge.testing.timing import median_seconds
    return median_seconds(fn, repeat, warmup_s=0.05) * 1e3


def export_dynamic(name: str, out: Path) -> tuple[Path, dict]:
    """NAME.onnx with dimension 0 of every input and output named "batch"; its feeds at batch 1."""
    import models
    import torch
    module, feeds = models.get(name, 0)
    inputs, outputs = models.input_names(name), models.output_names(name)
    args = tuple(torch.from_numpy(feeds[n]) for n in inputs)
    path = out / f"{name}.onnx"
    axes = {n: {0: "batch"} for n in inputs + outputs}
    with torch.inference_mode():
        torch.onnx.export(module, args, str(path), input_names=inputs, output_names=outputs,
                          dynamic_axes=axes, opset_version=17, dynamo=False)
    return path, feeds


def batched(feeds: dict, batch: int) -> dict:
    return {n: np.ascontiguousarray(np.repeat(a, batch, axis=0)) for n, a in feeds.items()}


def bench_batches(names: list[str], batches: list[int], repeat: int, threads: int) -> None:
    import onnxruntime as ort

    import tensorforge
    from tensorforge.frontend import from_onnx
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    from tensorforge.batch_buckets import HOT_CALLS
    print(f"{'model':14s} {'batch':>5s} {'runs as':>10s} {'staged ms':>10s} {'static ms':>10s} {'ort ms':>9s} "
          f"{'staged/static':>13s} {'staged/ort':>10s} {'compiled':>8s} {'first call s':>12s} {'later':>5s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path, feeds = export_dynamic(name, Path(tmp))
            staged = tensorforge.compile(from_onnx(str(path)), threads=threads)
            sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            for batch in batches:
                named = batched(feeds, batch)
                compiled, split = staged.info["specializations"], staged.info["batch_split"]["calls"]
                began = time.perf_counter()
                got = staged.run(**named)
                first = time.perf_counter() - began
                compiled = staged.info["specializations"] - compiled
                # the calls a batch size needs to settle on its plan (chunks, padding, or its own
                # specialization when it is worth a compile): what they compile is "later"
                later = staged.info["specializations"]
                for _ in range(2 * HOT_CALLS + 4):
                    staged.run(**named)
                later = staged.info["specializations"] - later
                runs_as = staged.info["batch_split"]["runs_as"].get(batch, "whole") \
                    if staged.info["batch_split"]["calls"] > split else "whole"
                static = tensorforge.compile(from_onnx(str(path), shapes={n: a.shape for n, a in named.items()}),
                                             threads=threads)
                ref = sess.run(None, named)
                for a, b in zip(got, ref):
                    np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3)
                times: dict[str, list] = {"staged": [], "static": [], "ort": []}
                for _ in range(3):       # interleaved blocks, so that noise hits all three
                    for key, fn in (("staged", staged.run), ("static", static.run)):
                        times[key].append(median_ms(lambda fn=fn, named=named: fn(**named), repeat))
                    times["ort"].append(median_ms(lambda sess=sess, named=named: sess.run(None, named), repeat))
                t = {k: float(np.median(v)) for k, v in times.items()}
                print(f"{name:14s} {batch:5d} {runs_as:>10s} {t['staged']:10.3f} {t['static']:10.3f} {t['ort']:9.3f} "
                      f"{t['staged'] / t['static']:13.2f} {t['staged'] / t['ort']:10.2f} {compiled:8d} {first:12.1f} "
                      f"{later:5d}", flush=True)
            print(f"{'':14s} specializations compiled: {staged.info['specializations']}", flush=True)


def _package_file(pkg: str, rel: str) -> str | None:
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], rel)
    return path if os.path.exists(path) else None


def real_cases() -> list[tuple[str, str, list[dict]]]:
    """(name, path, feeds per call) for the real models with symbolic dimensions found here."""
    r = np.random.default_rng(0)
    cases = []
    det = _package_file("rapidocr_onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx")
    if det:
        cases.append(("ocr text detector", det, [{"x": r.standard_normal(s).astype(np.float32)}
                                                 for s in ((1, 3, 224, 320), (1, 3, 160, 96), (2, 3, 64, 128))]))
    seq = _package_file("silero_vad", "data/silero_vad_16k_sequence.onnx")
    if seq:
        zeros = np.zeros((1, 1, 128), np.float32)
        cases.append(("vad (sequence)", seq, [{"input": (0.1 * r.standard_normal((n, 576))).astype(np.float32),
                                               "h": zeros, "c": zeros} for n in (8, 3, 20)]))
    vad = _package_file("silero_vad", "data/silero_vad.onnx")
    if vad:
        state = np.zeros((2, 1, 128), np.float32)
        cases.append(("vad (If)", vad, [{"input": (0.1 * r.standard_normal((1, n))).astype(np.float32),
                                         "state": state, "sr": np.array(sr, np.int64)}
                                        for n, sr in ((512, 16000), (256, 8000), (512, 16000))]))
    return cases


def bench_real(repeat: int, threads: int) -> None:
    import onnxruntime as ort

    import tensorforge
    from tensorforge.frontend import from_onnx
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    cases = real_cases()
    if not cases:
        print("no real models with symbolic dimensions are installed (pip install --no-deps "
              "rapidocr-onnxruntime silero-vad)")
        return
    print(f"\n{'real model':18s} {'input shapes':34s} {'max abs err':>11s} {'tf ms':>8s} {'ort ms':>8s} {'tf/ort':>6s}")
    for name, path, calls in cases:
        model = tensorforge.compile(from_onnx(path), threads=threads)
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        for feeds in calls:
            got, ref = model.run(**feeds), sess.run(None, feeds)
            err = max(float(np.abs(a - b).max()) for a, b in zip(got, ref))
            tf_ms = median_ms(lambda model=model, feeds=feeds: model.run(**feeds), repeat)
            ort_ms = median_ms(lambda sess=sess, feeds=feeds: sess.run(None, feeds), repeat)
            shapes = " ".join("x".join(map(str, a.shape)) or "()" for a in feeds.values())
            print(f"{name:18s} {shapes:34s} {err:11.2e} {tf_ms:8.3f} {ort_ms:8.3f} {tf_ms / ort_ms:6.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v1,dqn")
    ap.add_argument("--batches", default="1,4,16,3,7,12,24")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--real", action="store_true", help="also the real models with symbolic dimensions")
    args = ap.parse_args(argv)
    from tensorforge.runtime.module import set_num_threads
    set_num_threads(args.threads)
    import _peak
    peak = _peak.measure([args.threads])
    print(peak.describe(), flush=True)
    bench_batches(args.models.split(","), [int(b) for b in args.batches.split(",")], args.repeat, args.threads)
    if args.real:
        bench_real(args.repeat, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())

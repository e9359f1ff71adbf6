"""A model with a size only its data gives: a small detector whose head runs on the positions it
selects (`x[mask]`, `torch.nonzero`), through `from_torch` (a staged program: compiled
stretches, the selections in NumPy between them) against eager PyTorch, and against the same
module exported to ONNX and run by ONNX Runtime and by tensorforge's `from_onnx` (a staged ONNX
model), and through torch.compile(backend="tensorforge") with dynamo's
capture_dynamic_output_shape_ops (one graph, run staged as from_torch's is).

    python benchmarks/data_dependent.py [--threads 1,2] [--repeat 20] [--images 8]

The detector: three convs (3 -> 16 -> 32 -> 64 channels, stride 2 each) on a 3x128x128 image give
256 positions of 64 features; a linear layer scores each, the positions scoring above 0 are kept
(about half, a different count per image), and an MLP head (64 -> 128 -> 4) gives a box for
each kept position; the outputs are the boxes and the kept positions' indices.  `--images`
random images, each with its own count, are called once by every path before timing (the first
calls compile what their counts need: the head's stretch runs a count that is not a batch bucket
as chunks of the buckets), then the paths are timed interleaved, each pass over the images after
50 ms of untimed calls (a peer's thread pool may still spin on the other core).
Every output is checked against eager PyTorch before timing.  Printed: the machine's FMA peak,
the median ms per call of each path and the ratios to tensorforge's from_torch.
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _detector():
    import torch
    from torch import nn

    class Detector(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
                                          nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU())
            self.score = nn.Linear(64, 1)
            self.head = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4))

        def forward(self, image):
            tokens = self.backbone(image).flatten(2).transpose(1, 2).reshape(-1, 64)
            keep = self.score(tokens).squeeze(-1) > 0
            return self.head(tokens[keep]), torch.nonzero(keep).squeeze(-1)

    torch.manual_seed(0)
    module = Detector().eval()
    with torch.no_grad():           # centre the scores, so that about half the positions are kept
        probe = torch.randn(4, 3, 128, 128)
        tokens = module.backbone(probe).flatten(2).transpose(1, 2).reshape(-1, 64)
        module.score.bias -= module.score(tokens).median()
    return module


def _over(fn, arrays):
    return lambda: [fn(a) for a in arrays]


def _ort_call(session):
    return lambda a: session.run(None, {"image": a})


def _torch_call(fn):
    import torch
    return lambda a: [o.numpy() for o in fn(torch.from_numpy(a))]


def _check(name: str, got: list, want: list) -> None:
    for g, w in zip(got, want):
        if g.shape != w.shape:
            raise SystemExit(f"{name}: shape {g.shape} != eager's {w.shape}")
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-4, atol=1e-4,
                                   err_msg=name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--images", type=int, default=8)
    args = ap.parse_args(argv)

    import onnxruntime as ort
    import torch
    from _peak import measure

    import tensorforge
    from tensorforge.frontend import from_onnx, from_torch, torch_dynamo
    from tensorforge.runtime.module import set_num_threads
    from tensorforge.testing.timing import median_seconds

    threads = [int(t) for t in args.threads.split(",")]
    print(measure(threads).describe())
    module = _detector()
    gen = torch.Generator().manual_seed(1)
    images = [torch.randn(1, 3, 128, 128, generator=gen) for _ in range(args.images)]
    with torch.no_grad():
        eager = [[o.numpy() for o in module(x)] for x in images]
    counts = [int(e[0].shape[0]) for e in eager]
    print(f"kept positions per image (of 256): {counts}")
    path = os.path.join(tempfile.mkdtemp(), "detector.onnx")
    with warnings.catch_warnings(), redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (images[0],), path, input_names=["image"], output_names=["boxes", "index"],
                          dynamo=False)
    print("| threads | eager PyTorch ms | from_torch ms | ONNX Runtime ms | from_onnx ms | PyTorch/from_torch | "
          "ORT/from_torch | from_onnx/from_torch | torch.compile ms | torch.compile/from_torch | specializations |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    torch_dynamo.register()
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    for n in threads:
        torch.set_num_threads(n)
        set_num_threads(n)
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = n, 1
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        staged_torch = tensorforge.compile(from_torch(module, (images[0],)))
        staged_onnx = tensorforge.compile(from_onnx(path))
        arrays = [x.numpy() for x in images]
        torch._dynamo.reset()
        compiled = torch.compile(module, backend="tensorforge", options={"threads": n})
        paths = {
            "eager": lambda a: [o.numpy() for o in module(torch.from_numpy(a))],
            "from_torch": staged_torch,
            "ort": _ort_call(session),
            "from_onnx": staged_onnx,
            "torch.compile": _torch_call(compiled),
        }
        with torch.no_grad():
            for name, fn in paths.items():
                for a, want in zip(arrays, eager):
                    _check(name, [np.asarray(o) for o in fn(a)], want)
            for _ in range(2):                    # settle how each count runs
                for a in arrays:
                    staged_torch(a)
                    staged_onnx(a)
                    paths["torch.compile"](a)
            times = {name: [] for name in paths}
            for _ in range(args.repeat):
                for name, fn in paths.items():
                    # 50 ms of untimed calls first: the peer that ran before may leave its
                    # thread pool spinning on the other core for a while
                    seconds = median_seconds(_over(fn, arrays), 1, warmup=0, warmup_s=0.05)
                    times[name].append(seconds / len(arrays) * 1e3)
        ms = {name: float(np.median(v)) for name, v in times.items()}
        base = ms["from_torch"]
        print(f"| {n} | {ms['eager']:.3f} | {base:.3f} | {ms['ort']:.3f} | {ms['from_onnx']:.3f} | "
              f"{ms['eager'] / base:.2f} | {ms['ort'] / base:.2f} | {ms['from_onnx'] / base:.2f} | "
              f"{ms['torch.compile']:.3f} | {ms['torch.compile'] / base:.2f} | {staged_torch.info['specializations']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
